"""The test kit: what unit tests (and the benchmarks) need to run spectrace's hooks
without a runtime server: stand-ins of SGLang's and vLLM's classes driven one step at a
time (`stand_ins`), and the process state they run under (`process_state`: a Recorder of
the test's own, exporting to files or read back in memory)."""

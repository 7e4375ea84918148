"""Pure checks shared by `spectrace doctor` (static) and the run-time instrumentation: no
runtime imports, only shapes, counts, small lists and configs. Their messages use the
words of the runtime that ran them (`spectrace.runtimes.Runtime`: its label, the target
method that sets which layers are captured)."""

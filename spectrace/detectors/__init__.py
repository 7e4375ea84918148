"""The doctor's checkpoint pipeline (`spectrace doctor`): pure functions over a checkpoint's
config, tensor names, shapes and small maps (no file access, no runtime imports): which
trainer wrote it, what each runtime's loader makes of it, and the findings. The files are
read in `spectrace.doctor`; the run-time rules it reuses (aux, vocabulary map, weights)
are in `spectrace.rules`."""

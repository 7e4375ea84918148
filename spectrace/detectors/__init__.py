"""Pure checks shared by `spectrace doctor` (static) and the run-time instrumentation."""

"""The project's real-SGLang CPU harness: tiny models, the CPU kernel stand-in, a server
launcher and helpers to start and stop it. Used by the tests, the demo and the benchmarks;
not part of the installed library."""

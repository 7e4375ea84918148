"""Benchmarks and device checks for spectrace's hot path (see docs/performance.md)."""

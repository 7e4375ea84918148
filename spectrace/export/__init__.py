"""Getting telemetry out of a process: providers and readers (`providers`), the resource
(`resource`), the file exporter's writers (`files`), OTLP (`otlp`), the Prometheus
endpoint (`prometheus`), and the plumbing that keeps exports bounded (`bounded`)."""

"""Adapters: the only code that knows SGLang's module, class, method and field names.
Each turns SGLang calls into plain observations for the detectors and the Recorder."""

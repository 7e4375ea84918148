"""The run-time rules: what a width, an aux capture, a vocabulary map, a load, a token
comparison, a non-finite value, a synthetic-acceptance switch or a breakdown's buckets
mean, as pure functions over shapes, counts, small lists and configs (no runtime
imports). The adapters' hooks and the report judge with them; `spectrace doctor` reuses
the ones a checkpoint can be judged by before it runs (aux, vocabulary, weights). Their
messages use the words of the runtime that ran them (`spectrace.runtimes.Runtime`: its
label, the target method that sets which layers are captured)."""

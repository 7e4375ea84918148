"""The doctor's judging: pure functions over a checkpoint's config, tensor names, shapes and
small maps (no file access, no runtime imports): which trainer wrote it (`formats`), what
each runtime's loader makes of it (`loaders`: the facts and rows per runtime and release;
`draft_params`: the parameters it builds; `load_replay`: its load replayed on the key
names; `runtime_view`, `config_fields`), the config `--fix` would write (`translation`),
the findings (`checkpoint`, `checkpoint_aux`, `trained_settings`, `positions`, `dtypes`,
`quantization`, `tokenizers`, `layer_ids`) and the corrected copy's plan (`fix_plan`).
The run-time rules it reuses (aux, vocabulary map, weights) are `spectrace.rules`'; the
files are read and written in `doctor.files`."""

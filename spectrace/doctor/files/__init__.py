"""What the doctor reads and writes: a checkpoint's config, safetensors headers and small
maps (`checkpoint_files`, `safetensors_header`), PyTorch `.bin` weights through the
restricted loader only (`pickled`), the float16 range of its weights (`weight_scan`), the
target's dtype, quantization and tokenizer files (`target_files`), and the corrected copy
(`write_copy`). The judging is `doctor.judge`'s, on typed data, with no file access."""

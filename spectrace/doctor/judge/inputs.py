"""What the static checks read: a draft checkpoint as a `CheckpointView` (config, tensor
names, shapes, dtypes, the small `d2t` / `t2d` values) and its `Target`. Shared by judging
(`checkpoint`), the config translation (`translation`) and the plan of the corrected copy
(`fix_plan`), so none of them imports another for its types."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class CheckpointView:
    """What the checks need from a checkpoint: config.json, tensor shapes and dtypes, the
    values of its `d2t` maps and the target ids marked in `t2d`."""

    config: dict
    shapes: dict[str, tuple[int, ...]]
    dtypes: dict[str, str] = field(default_factory=dict)
    d2t: dict[str, list[int]] = field(default_factory=dict)  # key -> values (integer maps)
    t2d_hot: list[int] | None = None


@dataclass
class Target:
    """The target's config as the runtime reads it (a multimodal wrapper's `text_config`
    fills what the top level lacks) and its architectures (both levels)."""

    config: dict
    archs: tuple[str, ...]
    context: int | None = None  # the serving context length (None: the target's own)

    @property
    def hidden(self) -> int:
        return int(self.config["hidden_size"])

    @property
    def layers(self) -> int:
        return int(self.config["num_hidden_layers"])

    @property
    def vocab(self) -> int:
        return int(self.config["vocab_size"])

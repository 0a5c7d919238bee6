"""What a cell is, as its record and run.json keep it (matrix.Cell.fields()), and the image it ran in."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from pydantic import ConfigDict

from .codec import Model, Str, one_of
from .kinds import LAUNCHERS, NCCL_VIAS, Launcher, NcclVia

if TYPE_CHECKING:
    from .matrix import Cell

__all__ = ["CellFields", "ImageRef"]


class CellFields(Model):
    """What a cell is (matrix.Cell.fields() as recorded); None where an older record lacks it. Keys this
    harness does not know are kept as read."""

    model_config = ConfigDict(frozen=True, extra="allow")
    # an image stack's keys, written only for image stacks: built stacks' records are as before them
    OMIT_DEFAULT = frozenset({"image", "name", "image_id", "image_digest", "python_path", "distro"})
    cuda: Str | None = None
    torch: Str | None = None
    accelerate: Str | None = None
    nccl: Str | None = None  # "bundled" or the pinned version
    base: Str | None = None
    python: Str | None = None
    torch_index: Str | None = None
    template: Str | None = None
    nccl_via: Annotated[NcclVia, one_of(NCCL_VIAS)] | None = None
    stack: Str | None = None
    variant: Str | None = None
    launcher: Annotated[Launcher, one_of(LAUNCHERS)] | None = None
    id: Str | None = None
    # an image stack (the user's own image): as matrix.yaml names it, the stack's name, and once read the
    # image that ran (its content id, its registry digest) with its Python and distribution
    image: Str | None = None
    name: Str | None = None
    image_id: Str | None = None
    image_digest: Str | None = None
    python_path: Str | None = None
    distro: Str | None = None

    def to_json(self) -> dict[str, Any]:
        known = type(self).model_fields
        return {k: v for k, v in super().to_json().items() if k not in known or v is not None}

    @property
    def extra(self) -> dict[str, Any]:
        return dict(self.model_extra or {})

    @classmethod
    def from_cell(cls, cell: Cell) -> CellFields:
        return cls.read(cell.fields())

    @classmethod
    def from_json(cls, data: Any, where: str = "cell") -> CellFields:
        return cls.read(data, where)

    @property
    def is_cpu(self) -> bool:
        return self.cuda == "cpu"

    @property
    def is_host(self) -> bool:
        """Ran on the host engine (the stack installed in the harness's own Python)."""
        return self.base == "host"

    def nccl_label(self, loaded: str | None = None, how: str | None = None) -> str:
        """NCCL as loaded (when known), else as asked for, with how it got there (as the rank mapped it,
        when known, else as the cell asked); gloo for CPU cells."""
        if self.is_cpu:
            return "gloo (CPU)"
        via = how or self.nccl_via or "bundled"
        version = loaded or (self.nccl if self.nccl not in (None, "bundled") else None)
        return f"{version} ({via})" if version else via

    @property
    def image_label(self) -> str:
        """An image stack's name with the image that ran (short content id); "" for a stack the harness built.
        Two images with the same versions are two rows: a re-pushed tag is a new stack."""
        if not self.image:
            return ""
        short = self.short_image_id
        return f"{self.name or self.image} ({self.image}{', ' + short if short else ''})"

    @property
    def short_image_id(self) -> str:
        """The image that ran, as docker shows an id: its first 12 hex digits ("" when not read)."""
        return (self.image_id or "").removeprefix("sha256:")[:12]

    @property
    def pin(self) -> str | None:
        """The reference that finds exactly the image that ran (registry digest, else content id)."""
        return self.image_digest or self.image_id

    def row_key(self, loaded: str | None = None, how: str | None = None) -> tuple[str, ...]:
        """The report row this cell belongs to: the user's image ("" for built stacks), CUDA, NCCL, torch,
        Accelerate, launcher."""
        return (self.image_label, self.cuda or "?", self.nccl_label(loaded, how), self.torch or "?",
                self.accelerate or "?", self.launcher or "accelerate")


class ImageRef(Model):
    """The image a cell ran in (docker engine)."""

    tag: Str | None = None
    id: Str | None = None

"""The native runtime: the command runs on the host as it is (its GPUs by CUDA_VISIBLE_DEVICES, which the caller
sets in the command's environment); nothing outlives its process."""

from __future__ import annotations

from typing import ClassVar

from trtsweep.runtime.base import Launch

KIND = "native"


class Native:
    kind: ClassVar[str] = KIND
    in_image: ClassVar[bool] = False

    def prepare(self) -> list[str]:
        return []

    def command(self, launch: Launch) -> list[str]:
        return list(launch.argv)

    def held(self, name: str) -> list[str] | None:
        return None

    def record(self) -> dict[str, object]:
        return {}

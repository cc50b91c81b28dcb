"""Schedule primitives, one file per family; each file defines a mixin of tir.Schedule."""

__all__: list = []   # the mixins are used through tir.Schedule, which lists the public names

"""Schedule primitives, one file per family; each file defines a mixin of tir.Schedule."""

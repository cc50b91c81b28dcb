"""Integer arithmetic on index expressions: bounds and simplification."""
from .bound import int_bound
from .simplify import atom_key, can_prove, simplify

__all__ = ["int_bound", "simplify", "can_prove", "atom_key"]

"""Integer arithmetic on index expressions: bounds and simplification."""
from .bound import int_bound
from .simplify import (Linear, atom_key, can_prove, from_linear, is_multiple_of, linear_form,
                       simplify)

__all__ = ["int_bound", "simplify", "can_prove", "atom_key", "Linear", "linear_form", "from_linear",
           "is_multiple_of"]

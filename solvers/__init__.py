"""Numbers and equations: the equation (equation/, space/, network/), the integrators and
stepping methods that solve it (integrators/, methods/, reference/, solving), the number
systems they run in (backends/), model readers (io/) and result plumbing (results/);
docs/architecture.md section 2 says what each holds and may import.

Public API: backend, LayerWeights, PiecewiseControls, Problem, solve, solve_reference,
from_torch, load_model, save_model, Model, enclose (certified enclosures).
"""

from solvers.backends import backend
from solvers.enclosure import Enclosure, enclose
from solvers.equation.controls import PiecewiseControls
from solvers.equation.problem import Problem
from solvers.equation.weights import LayerWeights
from solvers.errors import InvalidInputError, TideError, UndefinedOperationError
from solvers.io.model_files import load_model, save_model
from solvers.io.torch_modules import from_torch
from solvers.network.model import Model
from solvers.reference.solution import ReferenceSolution, solve_reference
from solvers.solving import solve, solve_layers

__all__ = [
    "Enclosure",
    "InvalidInputError",
    "LayerWeights",
    "Model",
    "PiecewiseControls",
    "Problem",
    "ReferenceSolution",
    "TideError",
    "UndefinedOperationError",
    "backend",
    "enclose",
    "from_torch",
    "load_model",
    "save_model",
    "solve",
    "solve_layers",
    "solve_reference",
]

"""Numbers and equations: backends, operators, schemes, controls, problems.

Public API: backend, LayerWeights, PiecewiseControls, Problem, solve, solve_reference,
from_torch, load_model, save_model, Model.
"""

from solvers.backends import backend
from solvers.controls import PiecewiseControls
from solvers.driver import solve, solve_layers
from solvers.errors import InvalidInputError, TideError, UndefinedOperationError
from solvers.model import Model
from solvers.model_io import load_model, save_model
from solvers.problem import Problem
from solvers.reference_solution import ReferenceSolution, solve_reference
from solvers.torch_io import from_torch
from solvers.weights import LayerWeights

__all__ = [
    "InvalidInputError",
    "LayerWeights",
    "Model",
    "PiecewiseControls",
    "Problem",
    "ReferenceSolution",
    "TideError",
    "UndefinedOperationError",
    "backend",
    "from_torch",
    "load_model",
    "save_model",
    "solve",
    "solve_layers",
    "solve_reference",
]

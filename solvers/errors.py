"""The TideError family: every rejection of bad input or an undefined operation.

Messages name the offending value and say what is allowed, so that a user never has to
read a traceback from deep inside numpy to learn what was wrong.
"""

from __future__ import annotations


class TideError(ValueError):
    """Base of every error tide-suite raises on purpose."""


class InvalidInputError(TideError):
    """An argument has the wrong shape, type, size or a non-finite value."""


class UndefinedOperationError(TideError):
    """An operator was applied outside its domain (for example P at a constant row)."""


class NumericalBreakdownError(TideError):
    """A computation overflowed or produced NaN in its number format."""


class IntegrationError(TideError):
    """An integrator could not deliver a trustworthy result: its error estimate would not
    come down (a stiff or unstable field), or it ran out of its budget of steps,
    rejections or evaluations. The message names the layer, the time and the step size."""


class WideBallsError(NumericalBreakdownError):
    """Ball arithmetic lost more bits than its guard bits hold: the radii alone exceed
    what the computation must resolve (`radius` > `target`). ArbBackend.certify answers it
    by running again with more guard bits."""

    def __init__(self, message: str, radius: float, target: float) -> None:
        super().__init__(message)
        self.radius, self.target = radius, target


class OutOfScopeError(TideError):
    """A method was asked for a problem outside what it can do, for a reason it states
    (for example an enclosure of a flow with ReLU, whose field is not smooth)."""

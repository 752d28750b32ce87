"""The one error type library code raises for a user's mistake or a missing piece.

Only entry points turn it into an exit code; its message says what to do next.
"""


class AlloclabError(Exception):
    """A problem the user can fix. `hint` says how."""

    def __init__(self, message: str, hint: str = ""):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}\n  -> {self.hint}" if self.hint else self.message

"""Errors the user can act on, each carrying a one-sentence message."""


class TranslatorError(Exception):
    """An error with a one-sentence message meant for the user."""

"""translator: a small, honest Hindi–English Transformer NMT trainer."""

__version__ = "0.1.0"

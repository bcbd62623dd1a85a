"""rpr-nmt: machine translation with relative position representations (Shaw et al., 2018)."""

__version__ = "0.1.0"

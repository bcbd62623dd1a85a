"""Deployment of trained models (what a model learned is read by rpr_nmt/inspection).

    ctranslate2.py  export to CTranslate2 (check_exportable, build_spec, export_ctranslate2)
    positions.py    each position method onto the spec, and the one-line refusals
    decoding.py     our decoding rules as CTranslate2 translate_batch options, with the caps of
                    position tables, learned or an exported sinusoid's (PositionLimits,
                    rpr_nmt.decode.constraints)

ctranslate2 is an optional dependency (pip install 'rpr-nmt[export]'): it is imported only when
a model is exported or translated with it.
"""

from rpr_nmt.decode.constraints import PositionLimits
from rpr_nmt.export.ctranslate2 import (
    CTRANSLATE2_VERSION,
    QUANTIZATIONS,
    ExportError,
    build_spec,
    check_exportable,
    export_ctranslate2,
    read_position_limits,
)
from rpr_nmt.export.decoding import (
    NO_LIMITS,
    max_decoding_length,
    translate_ctranslate2,
    translate_options,
)

__all__ = [
    "CTRANSLATE2_VERSION",
    "NO_LIMITS",
    "QUANTIZATIONS",
    "ExportError",
    "PositionLimits",
    "build_spec",
    "check_exportable",
    "export_ctranslate2",
    "max_decoding_length",
    "read_position_limits",
    "translate_ctranslate2",
    "translate_options",
]

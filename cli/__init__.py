"""The ``attn-dyn`` command line (installed as ``minimal_attn.cli``)."""

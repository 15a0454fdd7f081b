"""Backends with the NumPy core's interface (installed as ``minimal_attn.backends``).

``torch_backend`` mirrors :mod:`minimal_attn.losses` with torch autograd and
hosts the CNN experiments; it is imported lazily so the core never needs torch.
"""

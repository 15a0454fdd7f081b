r"""The lab around the textbook: configs, runners, the one epoch loop, checkpoints,
reports, plots, the results store and sweeps.

Each experiment of both papers is a function here (or in ``minimal_attn.backends``
for the torch models) that a Python user can call; the CLI only parses options
into these configs. Modules here may reach a torch backend only inside a function,
when a run asks for it, so importing them never imports torch. Runs report progress
through the one callback of :mod:`.progress`.
"""

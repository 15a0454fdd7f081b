"""matplotlib without a display, imported only when a figure is drawn."""


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt

"""The Qt layer: views over `explorer.state` and the numpy arrays of `bertcore.inspection`."""

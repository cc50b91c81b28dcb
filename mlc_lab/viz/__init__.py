"""Pictures for the chapters, drawn with matplotlib: ``viz.gpu`` (thread grids, warp accesses)."""

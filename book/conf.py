# Sphinx configuration of the course's site; book/build.py runs Sphinx with it (`make book`).
project = "mlc_lab"
author = "mlc_lab"
html_title = "mlc_lab: Machine Learning Compilation"
extensions = ["myst_nb"]
myst_enable_extensions = ["dollarmath"]
nb_execution_mode = "off"              # build.py executes the chapters; Sphinx only renders them
nb_output_stderr = "show"              # one-time notices (e.g. the GPU simulator's) belong to the page
html_theme = "furo"                    # light and dark, following the reader's system or its toggle
html_static_path = ["static"]
html_css_files = ["book.css"]
suppress_warnings = ["myst.header", "mystnb.unknown_mime_type"]
exclude_patterns = ["**.ipynb_checkpoints"]
html_show_copyright = False

"""File and console utilities every part uses: atomic writes, regular files only, TensorFlow's log lines, a progress bar."""

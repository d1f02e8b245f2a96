"""Built-in policy plugins, registered through the ``specpolicy`` entry-point group."""

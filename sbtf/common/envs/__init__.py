"""What sbtf does to a user's environment before training sees it: the old-gym API adapter and the packing of Dict
observations into flat rows."""

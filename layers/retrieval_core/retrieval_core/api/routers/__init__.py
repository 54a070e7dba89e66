"""One router per endpoint group; handlers pick the routers they serve."""

"""Load and search: the queueing (event) model of continuous batching, and the planner's search
over GPUs, counts and formats for the cheapest setup that meets the SLOs."""

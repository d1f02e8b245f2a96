"""Evaluation of policies: by replay (modelled, torch-free), in the serving simulation, or decoded live;
the figures a comparison reports, plots and off-policy evaluation."""

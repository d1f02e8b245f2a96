"""The DFlash drafter's config conventions, without torch: default target layers, depth, RoPE fields."""

from __future__ import annotations


def legacy_rope_fields(rope_parameters: dict | None) -> dict:
    """``rope_theta`` and ``rope_scaling`` at the top level of a config, where transformers 4.x and the z-lab
    code read them (5.x reads ``rope_parameters``); without them a 4.x reader silently uses theta 10000."""
    if not rope_parameters:
        return {}
    rope = dict(rope_parameters)
    theta = rope.pop("rope_theta", None)
    scaled = rope.get("rope_type", "default") != "default"
    return {**({"rope_theta": float(theta)} if theta is not None else {}),
            "rope_scaling": rope if scaled else None}


def infer_target_layers(target_layer_ids: list[int], num_draft_layers: int) -> int:
    """The target depth L whose default layer choice (:func:`default_target_layer_ids`) is
    ``target_layer_ids``; a ValueError asking for it when no single L gives them."""
    ids = [int(i) for i in target_layer_ids]
    depths = [n for n in range(max(ids) + 1, max(ids) + 2 * len(ids) + 8)
              if default_target_layer_ids(n, num_draft_layers) == ids]
    if len(depths) != 1:
        raise ValueError(f"cannot tell the target's depth from target_layer_ids {ids} (the default layer "
                         f"choice gives them for {depths or 'no'} depths); pass --num-target-layers N (the "
                         "target config's num_hidden_layers)")
    return depths[0]


def default_target_layer_ids(num_target_layers: int, num_draft_layers: int) -> list[int]:
    """DFlash's default choice of target layers: [L // 2] for one layer, else evenly from 1 to L - 3."""
    if num_draft_layers == 1:
        return [num_target_layers // 2]
    start, end = 1, num_target_layers - 3
    span = end - start
    return [round(start + i * span / (num_draft_layers - 1)) for i in range(num_draft_layers)]

"""Per-stage channel lists that must agree after shrinking: chains and backbone couplings.

The tiny level scales every per-stage width list by position (``16 * 2**i``,
:func:`graphcheck.zoo._sizes._scale_list`), each list on its own. Some lists are
tied to another value in the default config, and scaling them separately breaks
the tie (a convolution then gets the wrong channel count). The default config
(before shrinking) says which ties hold; each tie found there is restored on
the shrunk lists:

- a chain: stage ``i`` takes what stage ``i - 1`` gives (``stage_in_channels[i]
  == stage_out_channels[i - 1]``), and the first stage what the stem gives
  (``stem_channels[-1]``): HGNetV2 and the detectors built on it (D-FINE,
  DEIMv2, PP-DocLayout);
- a list whose every entry was the hidden size (``decoder_in_channels`` of the
  RT-DETR family, ``[256, 256, 256]`` with ``d_model`` 256) stays that;
- a list that was the backbone's channels at its ``out_indices`` (the
  detectors' ``encoder_in_channels``) follows the shrunk backbone;
- a list that was another one reversed (SAM 2's neck lists the Hiera backbone's
  stage widths top-down, ``backbone_channel_list``) is that one reversed, and a
  ``hidden_size`` that was the first stage's width (Hiera's 96) stays that;
- per-stage widths that a PP-LCNet-style ``block_configs`` (which the shrinking
  leaves as it is: ``[kernel, in, out, stride, se]`` per block) also states
  stay what the blocks say;
- the feature-map sizes a SAM 2-style model reshapes its backbone's outputs to
  (``backbone_feature_sizes``, ``[[256, 256], [128, 128], [64, 64]]`` for a
  1024-pixel image) scale with the image.
"""

from __future__ import annotations

from graphcheck.zoo._sizes import _STAGE_WIDTH_KEYS, Dict, _int_list, _is_subconfig

__all__ = ["couple_stages"]

#: Scalar widths a per-stage list may repeat (every stage at the model's width).
_SCALAR_WIDTHS = ("d_model", "hidden_size", "encoder_hidden_dim")


def couple_stages(old: Dict, new: Dict) -> None:
    """Restores on ``new`` (shrunk) the per-stage ties that ``old`` (its default) has."""
    _couple(old, new)
    _follow_reversed(_stage_lists(old, new))
    image = _image_sizes(old, new)
    if image is not None:
        _feature_sizes(new, *image)


def _couple(old: Dict, new: Dict) -> None:
    for key, value in new.items():
        before = old.get(key)
        if _is_subconfig(value) and isinstance(before, dict):
            _couple(before, value)
    _chain(old, new)
    _follow_width(old, new)
    _follow_backbone(old, new)
    _follow_first_stage(old, new)
    _follow_blocks(old, new)


def _chain(old: Dict, new: Dict) -> None:
    for in_key in [k for k in new if k.endswith("in_channels")]:
        out_key = in_key.removesuffix("in_channels") + "out_channels"
        o_in, o_out, n_in, n_out = old.get(in_key), old.get(out_key), new[in_key], new.get(out_key)
        if not (_int_list(o_in) and _int_list(o_out) and _int_list(n_in) and _int_list(n_out)):
            continue
        if len(o_in) != len(o_out) or len(n_in) != len(n_out) or len(o_in) != len(n_in):
            continue
        if o_in[1:] != o_out[:-1]:
            continue
        stem_old, stem_new = old.get("stem_channels"), new.get("stem_channels")
        first = n_in[0]
        if _int_list(stem_old) and _int_list(stem_new) and o_in[0] == stem_old[-1]:
            first = stem_new[-1]
        new[in_key] = [first, *n_out[:-1]]


def _follow_width(old: Dict, new: Dict) -> None:
    for key in _STAGE_WIDTH_KEYS:
        values, shrunk = old.get(key), new.get(key)
        if not (_int_list(values) and _int_list(shrunk)) or len(values) < 2:
            continue
        for width in _SCALAR_WIDTHS:
            w_old, w_new = old.get(width), new.get(width)
            if isinstance(w_old, int) and isinstance(w_new, int) and set(values) == {w_old}:
                new[key] = [w_new] * len(shrunk)
                break


def _stage_channels(old_bb: Dict, new_bb: Dict, wanted: list[int]) -> list[int] | None:
    """The shrunk backbone's channels at its ``out_indices``, if ``wanted`` were the old ones."""
    o_idx, n_idx = old_bb.get("out_indices"), new_bb.get("out_indices")
    if not (_int_list(o_idx) and _int_list(n_idx)):
        return None
    for key in _STAGE_WIDTH_KEYS:
        o_list, n_list = old_bb.get(key), new_bb.get(key)
        if not (_int_list(o_list) and _int_list(n_list)):
            continue
        # out_indices count the stem as stage 0: stage i is entry i - 1 of a per-stage list.
        if any(not 1 <= i <= len(o_list) for i in o_idx) or any(
            not 1 <= i <= len(n_list) for i in n_idx
        ):
            continue
        if [o_list[i - 1] for i in o_idx] == wanted:
            return [n_list[i - 1] for i in n_idx]
    return None


def _follow_backbone(old: Dict, new: Dict) -> None:
    old_bb, new_bb = old.get("backbone_config"), new.get("backbone_config")
    if not (isinstance(old_bb, dict) and isinstance(new_bb, dict)):
        return
    for key in _STAGE_WIDTH_KEYS:
        values = old.get(key)
        if _int_list(values) and _int_list(new.get(key)):
            channels = _stage_channels(old_bb, new_bb, values)
            if channels is not None:
                new[key] = channels


def _image_sizes(old: Dict, new: Dict) -> tuple[int, int] | None:
    """The first square image side the shrinking changed in the tree: (before, after)."""
    o, n = old.get("image_size"), new.get("image_size")
    if isinstance(o, int) and isinstance(n, int) and not isinstance(o, bool) and o != n:
        return o, n
    for key, value in new.items():
        before = old.get(key)
        if _is_subconfig(value) and isinstance(before, dict):
            found = _image_sizes(before, value)
            if found is not None:
                return found
    return None


def _feature_sizes(d: Dict, old: int, new: int) -> None:
    sizes = d.get("backbone_feature_sizes")
    if isinstance(sizes, list) and all(_int_list(s) for s in sizes):
        d["backbone_feature_sizes"] = [[max(1, v * new // old) for v in s] for s in sizes]
    for value in d.values():
        if _is_subconfig(value):
            _feature_sizes(value, old, new)


def _follow_first_stage(old: Dict, new: Dict) -> None:
    hidden_old, hidden_new = old.get("hidden_size"), new.get("hidden_size")
    if not isinstance(hidden_old, int) or not isinstance(hidden_new, int):
        return
    for key in _STAGE_WIDTH_KEYS:
        values, shrunk = old.get(key), new.get(key)
        if _int_list(values) and _int_list(shrunk) and len(values) > 1 and values[0] == hidden_old:
            new["hidden_size"] = shrunk[0]
            return


_Lists = list[tuple[Dict, str, list[int]]]


def _stage_lists(old: Dict, new: Dict) -> _Lists:
    """Every per-stage width list of the tree: (its shrunk dict, key, default value)."""
    found: _Lists = []
    for key, value in new.items():
        before = old.get(key)
        if key in _STAGE_WIDTH_KEYS and _int_list(before) and _int_list(value):
            found.append((new, key, before))
        elif _is_subconfig(value) and isinstance(before, dict):
            found.extend(_stage_lists(before, value))
    return found


def _follow_reversed(lists: _Lists) -> None:
    for target, key, values in lists:
        if len(values) < 2 or values == sorted(values):
            continue  # a list in stage order is scaled as it is; a top-down one follows it
        for source, other, other_values in lists:
            if other_values == values[::-1] and len(source[other]) == len(target[key]):
                target[key] = source[other][::-1]
                break


def _follow_blocks(old: Dict, new: Dict) -> None:
    blocks = new.get("block_configs")
    if not (isinstance(blocks, list) and blocks == old.get("block_configs")):
        return
    try:
        outs = [int(stage[-1][2]) for stage in blocks]
    except (TypeError, IndexError, ValueError):
        return
    for key in _STAGE_WIDTH_KEYS:
        if old.get(key) == outs:
            new[key] = list(outs)

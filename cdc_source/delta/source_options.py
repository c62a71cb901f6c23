"""The options a change stream was started with, read back from its DataFrame's plan."""

from __future__ import annotations

SOURCE_NAME = "cdc-mysql"


def _nodes(plan):
    yield plan
    children = plan.children().iterator()
    while children.hasNext():
        yield from _nodes(children.next())


def source_options(stream_df) -> dict[str, str]:
    """The options of the one ``format("cdc-mysql")`` relation of ``stream_df`` (a
    streaming DataFrame of classic Spark, whose plan is reachable from Python); a
    DataFrame without exactly one such relation, or of Spark Connect, is refused: pass the
    options then."""
    try:
        plan = stream_df._jdf.queryExecution().analyzed()
    except AttributeError as error:  # Spark Connect: no JVM plan in this process
        raise ValueError(
            "the source's options cannot be read from this DataFrame: pass options=..."
        ) from error
    found = []
    for node in _nodes(plan):
        if node.getClass().getSimpleName() != "StreamingRelationV2":
            continue
        if node.sourceName() == SOURCE_NAME:
            found.append(dict(node.extraOptions().asCaseSensitiveMap()))
    if len(found) != 1:
        raise ValueError(
            f"the DataFrame reads {len(found)} {SOURCE_NAME} streams, not one: pass options=..."
        )
    return found[0]

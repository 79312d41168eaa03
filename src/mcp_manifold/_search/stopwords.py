"""Words that carry no signal for picking a tool.

Ordinary English function words plus the politeness and request phrasing people put in front of a
task ("could you please help me ...", "tell me", "give me"). Domain words such as "get", "list" or "file" stay: their
weight is left to BM25's IDF, which knows how common they are in the catalog at hand.
"""

from __future__ import annotations

_FUNCTION_WORDS = """
a about above after again against all am an and any are as at be because been before being below between both but
by can cannot could did do does doing down during each either else etc few for from further had has have having he
her here hers herself him himself his how i if in into is it its itself just me more most my myself neither no nor
not of off on once only or other ought our ours ourselves out over own per same shall she should so some such than
that the their theirs them themselves then there these they this those through thus to too under until up upon us
very via was we were what whatever when whenever where whereas wherever whether which while who whom whose why will
with within without would you your yours yourself yourselves
"""

_REQUEST_PHRASING = """
please kindly could would can may might let lets like want wants wanted need needs needed
help give tell also just really maybe sure thanks thank hi hello
"""

STOPWORDS: frozenset[str] = frozenset((_FUNCTION_WORDS + _REQUEST_PHRASING).split())

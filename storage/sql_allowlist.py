"""What raw SQL (`storage.readonly_sql`) may contain: the allow-lists the guard checks every
node of ClickHouse's `EXPLAIN AST` against.

Everything not named here is refused. The lists are deliberately short: a function or node
kind a user misses is one line to add after a look at what it can reach; one that slips in
unchecked can read files, other databases or the salts.
"""

from __future__ import annotations

from storage import tables

#: Tables of Tally's database that raw SQL may read: the raw archive and the derived tables
#: (storage/migrations/*.sql). Never `salts` (with the day's salt every ip_hash and visitor_id
#: can be linked back to an address) nor `schema_migrations`, nor any table added later until
#: it is listed here or among the derived tables (storage/tables.py: what the stream jobs
#: compute from the log, so nothing a reader of the archive could not compute already).
READABLE_TABLES = frozenset({tables.EVENTS, tables.SITES, tables.STREAM_BATCHES, *tables.DERIVED_TABLES})

#: Never readable, whatever the catalog says.
PRIVATE_TABLES = frozenset({tables.SALTS, tables.SCHEMA_MIGRATIONS})

#: AST node kinds of a SELECT's parts. Absent on purpose: `Set` (a SETTINGS clause),
#: `QueryParameter` ({name:Type}), `ColumnsApplyTransformer` (`* APPLY(f)` names a function the
#: AST does not show), `Explain`, and every statement other than a SELECT.
NODE_KINDS = frozenset(
    {
        "SelectWithUnionQuery",
        "SelectIntersectExceptQuery",
        "SelectQuery",
        "Subquery",
        "WithElement",
        "ExpressionList",
        "TablesInSelectQuery",
        "TablesInSelectQueryElement",
        "TableExpression",
        "TableIdentifier",
        "TableJoin",
        "ArrayJoin",
        "SampleRatio",
        "Identifier",
        "Literal",
        "Function",
        "Asterisk",
        "QualifiedAsterisk",
        "ColumnsRegexpMatcher",
        "ColumnsListMatcher",
        "QualifiedColumnsRegexpMatcher",
        "QualifiedColumnsListMatcher",
        "ColumnsTransformerList",
        "ColumnsExceptTransformer",
        "ColumnsReplaceTransformer",
        "ColumnsReplaceTransformer::Replacement",
        "OrderByElement",
        "InterpolateElement",
        "WindowDefinition",
        "WindowListElement",
    }
)

#: `x IN y`: when y is a bare name, ClickHouse reads it as a table (`1 IN system.numbers`).
IN_FUNCTIONS = frozenset(
    {
        "in",
        "notin",
        "globalin",
        "globalnotin",
        "nullin",
        "notnullin",
        "globalnullin",
        "globalnotnullin",
    }
)

_AGGREGATES = """
count sum avg min max any anylast anyheavy argmin argmax uniq uniqexact uniqcombined
uniqcombined64 uniqhll12 uniqtheta grouparray grouparraysorted grouparrayinsertat groupuniqarray
groupbitand groupbitor groupbitxor groupbitmap groupconcat topk topkweighted median medianexact
quantile quantiles quantileexact quantilesexact quantiletdigest quantilestdigest quantiletiming
quantilesexactweighted quantileexactweighted quantiledeterministic varpop varsamp stddevpop
stddevsamp covarpop covarsamp corr skewpop skewsamp kurtpop kurtsamp sumwithoverflow
summap minmap maxmap avgweighted first_value last_value histogram simplelinearregression
retention windowfunnel sequencematch sequencecount entropy mode
"""
_WINDOW_FUNCTIONS = """
row_number rank dense_rank percent_rank cume_dist ntile lag lead laginframe leadinframe
nth_value
"""
_OPERATORS = """
plus minus multiply divide intdiv intdivorzero modulo moduloorzero negate abs gcd lcm
equals notequals less greater lessorequals greaterorequals and or not xor
like notlike ilike notilike match isnull isnotnull isnotdistinctfrom coalesce ifnull nullif
assumenotnull tonullable if multiif caseWithExpression tuple tupleelement array arrayelement
map mapkeys mapvalues mapcontains lambda identity
"""
_MATHS = """
round floor ceil ceiling trunc roundtoexp2 exp log log2 log10 sqrt cbrt pow power sign
least greatest e pi isnan isinfinite isfinite
"""
_STRINGS = """
length lengthutf8 empty notempty lower upper lowerutf8 upperutf8 concat concatwithseparator
substring substr substringutf8 left right trim trimboth trimleft trimright ltrim rtrim
reverse repeat replace replaceall replaceone replaceregexpall replaceregexpone position
positioncaseinsensitive locate startswith endswith splitbychar splitbystring
extract extractall extractallgroups multisearchany countsubstrings format leftpad rightpad
lpad rpad base64encode base64decode hex unhex tostring tofixedstring
domain domainwithoutwww topleveldomain protocol path pathfull querystring fragment
extracturlparameter cutquerystring cutwww urldecode urlencode cutfragment
"""
_DATES = """
now now64 today yesterday todate todate32 todatetime todatetime64 toyear toquarter tomonth
todayofmonth todayofweek todayofyear tohour tominute tosecond tounixtimestamp toweek toyearweek
toisoweek toisoyear tostartofyear tostartofquarter tostartofmonth tostartofweek tostartofday
tostartofhour tostartofminute tostartoffiveminutes tostartoffifteenminutes tostartofinterval
tostartofsecond tomonday datediff date_diff dateadd date_add datesub date_sub dateTrunc date_trunc
addseconds addminutes addhours adddays addweeks addmonths addyears subtractseconds
subtractminutes subtracthours subtractdays subtractweeks subtractmonths subtractyears
tointervalsecond tointervalminute tointervalhour tointervalday tointervalweek
tointervalmonth tointervalquarter tointervalyear formatdatetime parsedatetimebesteffort
parsedatetimebesteffortornull parsedatetime64besteffort totimezone timezoneof
fromunixtimestamp fromunixtimestamp64milli tounixtimestamp64milli timeslot
"""
_CONVERSIONS = """
cast accuratecast accuratecastornull touint8 touint16 touint32 touint64 toint8 toint16 toint32
toint64 tofloat32 tofloat64 todecimal32 todecimal64 touint8ornull touint32ornull
touint64ornull toint64ornull tofloat64ornull touint64orzero toint64orzero tofloat64orzero
todateornull todatetimeornull touuid tolowcardinality totypename reinterpretasstring
"""
_ARRAYS = """
range arrayjoin has hasall hasany indexof arraycount arraysum arrayavg arraymin arraymax
arraymap arrayfilter arrayexists arrayall arrayfirst arraylast arraysort arrayreversesort
arraydistinct arrayuniq arrayconcat arrayslice arraypushback arraypushfront arrayenumerate
arrayenumerateuniq arrayreverse arrayflatten arraystringconcat arraycompact arrayzip
arraycumsum arraydifference emptyarraystring emptyarrayuint64 length
"""
_HASHES = """
cityhash64 siphash64 xxhash64 farmhash64 murmurhash3_64 sha256 md5 generateuuidv4 rand rand64
randcanonical
"""
_JSON = """
jsonextract jsonextractstring jsonextractint jsonextractfloat jsonextractbool jsonextractraw
jsonhas jsonlength visitparamextractstring
"""

#: Ordinary, aggregate and window functions, lowercased (ClickHouse's own names are
#: case-sensitive but many have case-insensitive aliases, e.g. COUNT, LOWER; comparing
#: lowercased refuses `FILE` as well as `file`). Absent on purpose: file, url, remote, s3,
#: input, executable, dictGet*, joinGet, getSetting, currentDatabase, hostName, version and
#: other introspection, sleep, throwIf, and everything else.
_GROUPS = (_AGGREGATES, _WINDOW_FUNCTIONS, _OPERATORS, _MATHS, _STRINGS, _DATES, _CONVERSIONS, _ARRAYS)
FUNCTIONS = (
    frozenset(name.lower() for group in (*_GROUPS, _HASHES, _JSON) for name in group.split())
    | IN_FUNCTIONS
    | frozenset({"exists"})
)
AGGREGATES = frozenset(_AGGREGATES.split())
# Not arrayReduce: it names its aggregate in a string, out of the allow-list's sight.
#: Suffixes that turn an aggregate into another (`countIf`, `uniqExactState`, `sumOrNull`).
AGGREGATE_COMBINATORS = ("if", "array", "distinct", "ornull", "ordefault", "merge", "state", "foreach")


def function_allowed(name: str) -> bool:
    """Whether raw SQL may call `name`: listed, or a listed aggregate with combinators."""
    lowered = name.lower()
    if lowered in FUNCTIONS:
        return True
    while lowered not in AGGREGATES:
        stripped = next((lowered[: -len(c)] for c in AGGREGATE_COMBINATORS if lowered.endswith(c)), None)
        if not stripped:
            return False
        lowered = stripped
    return True

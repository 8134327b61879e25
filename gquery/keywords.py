"""DuckDB's keywords (its duckdb_keywords(), every category, as DuckDB 2.0.1 lists them): a column named by
one is written quoted where DuckDB prints an expression as a column's name (max("day")); and those its parser refuses
as an alias, where sqlglot's takes them (gquery.sql refuses such a text as DuckDB does). tests/test_sql.py checks each
set against the DuckDB installed."""

KEYWORDS = frozenset("""
    abort absolute access action add admin after aggregate all also alter always analyse analyze and anti any approx
    array as asc asof assertion assignment asymmetric at attach attribute authorization backward before begin
    between bigint binary bit boolean both by cache call called cascade cascaded case cast catalog centuries century
    chain char character characteristics check checkpoint class close cluster coalesce collate collation column
    columns columns comment comments commit committed compression concurrently configuration conflict connect
    connection constraint constraints content continue conversion copy cost create cross csv cube current cursor
    cycle data database day days deallocate dec decade decades decimal declare default defaults deferrable deferred
    definer delete delimiter delimiters depends desc describe destroy detach dictionary disable discard disconnect
    distance distinct do document domain double drop each else enable encoding encrypted end enum error escape event
    exact except exclude excluding exclusive execute exists explain export export_state extension extensions
    external extract false family fetch filter first float following for force foreign forward freeze from full
    function functions generated generated glob global grant granted group grouping grouping_id groups handler
    having header hold hour hours identity if ignore ilike immediate immutable implicit import in include including
    increment index indexes inherit inherits initially inline inner inout input insensitive insert install instead
    int integer intersect interval into invoker is isnull isolation join json key label lambda language large last
    lateral leading leakproof left level like limit listen load local location lock locked logged macro map map
    mapping match matched materialized maxvalue merge method microsecond microseconds millennia millennium
    millisecond milliseconds minute minutes minvalue mode month months move name names national natural nchar
    nearest new next no none not nothing notify notnull nowait null nullif nulls numeric object of off offset oids
    old on only operator option options or order ordinality others out outer over overlaps overlay overriding owned
    owner parallel parser partial partition partitioned passing password percent persistent pivot pivot_longer
    pivot_wider placing plans policy position positional pragma preceding precision prepare prepared preserve
    primary prior privileges procedural procedure program publication qualify quarter quarters quote range read real
    reassign recheck recursive ref references referencing refresh register reindex relative release rename
    repeatable replace replica reset resource resources respect restart restrict returning returns revoke right role
    rollback rollup row rows rule sample savepoint schema schemas scope scroll search second seconds secret secure
    security select semi sequence sequences serializable server session set setof sets share show similar similarity
    simple skip smallint snapshot some sorted source sql stable standalone start statement statistics stdin stdout
    storage stored strict strip struct struct subscription substring summarize symmetric sysid system table tables
    tablesample tablespace target temp template temporary text then ties time timestamp to trailing transaction
    transform treat trigger trim true truncate trusted try_cast try_cast tuple tuple type types unbounded
    uncommitted unencrypted union unique unknown unlisten unlogged unpack unpivot until update use user using vacuum
    valid validate validator value values varchar variable variadic varying verbose version view views virtual
    volatile week weeks when where whitespace window with within without work wrapper write xml xmlattributes
    xmlconcat xmlelement xmlexists xmlforest xmlnamespaces xmlparse xmlpi xmlroot xmlserialize xmltable year years
    yes zone
""".split())

# keywords DuckDB's parser refuses as a select item's name written without AS (SUM(x) day: AS day is fine)
BARE_LABEL_REFUSED = frozenset("""
    all analyse analyze and anti any array as asc asof asymmetric at authorization binary both by case cast
    centuries century check collate collation column concurrently constraint create cross day days decade decades
    default deferrable desc describe distinct do else end escape exclude false fetch filter for foreign freeze from
    full glob group having hour hours ignore ilike in initially inner into is join lambda lateral leading left like
    limit microsecond microseconds millennia millennium millisecond milliseconds minute minutes month months natural
    not null offset on only or order outer over overlaps pivot pivot_longer pivot_wider placing positional precision
    primary qualify quarter quarters references rename replace respect returning right second seconds select semi
    show similar some summarize symmetric table tablesample then to trailing true unique unpack unpivot using
    variadic varying verbose week weeks when where window with within without year years
""".split())

# keywords DuckDB's parser refuses as a column's name written unquoted (SUM(order), WHERE group > 1: "order" is fine)
COLUMN_REFUSED = frozenset("""
    all analyse analyze and anti any array as asc asof asymmetric at authorization binary both by case cast
    check collate collation column concurrently constraint create cross deferrable desc describe distinct do
    else end except fetch for foreign freeze from full glob group having ilike in initially inner intersect into
    is isnull join lambda lateral leading left like limit natural not notnull offset on only or order outer
    overlaps pivot pivot_longer pivot_wider placing positional primary qualify references returning right select
    semi show similar some summarize symmetric table tablesample then to trailing union unique unpack unpivot
    using variadic verbose when where window with
""".split())

# keywords DuckDB's parser refuses as a table's alias, with AS or without (FROM t all)
TABLE_ALIAS_REFUSED = frozenset("""
    all analyse analyze and anti any array as asc asof asymmetric at authorization binary both by case cast check
    collate collation column concurrently constraint create cross default deferrable desc describe distinct do else
    end except false fetch for foreign freeze from full glob group having ilike in initially inner intersect into is
    isnull join lambda lateral leading left like limit natural not notnull null offset on only or order outer
    overlaps pivot pivot_longer pivot_wider placing positional primary qualify references returning right select
    semi show similar some summarize symmetric table tablesample then to trailing true union unique unpack unpivot
    using variadic verbose when where window with
""".split())

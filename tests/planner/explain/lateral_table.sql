-- Python table functions (tests/support/udtf_functions.py) with LATERAL TABLE: a Correlate per
-- spelling (a comma join, a LEFT JOIN ... ON TRUE whose argument a calc computes first), each a
-- stateless table_function on a forward edge that keeps the input's columns and time attribute,
-- so a TUMBLE over it works; over an updating input (a GROUP BY) it is updating too.
CREATE FUNCTION split_words AS 'udtf_functions.split_words' LANGUAGE PYTHON;
CREATE TEMPORARY FUNCTION count_to AS 'udtf_functions.count_to';

CREATE TABLE lines (ts TIMESTAMP(3), author VARCHAR, line VARCHAR,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH ('connector' = 'filesystem', 'path' = 'lines.csv', 'format' = 'csv');

CREATE VIEW words AS
SELECT ts, author, word, len FROM lines, LATERAL TABLE(split_words(line)) AS T(word, len);

CREATE MATERIALIZED VIEW padded AS
SELECT l.author, w.word FROM lines AS l LEFT JOIN LATERAL TABLE(split_words(lower(l.line))) AS w(word, len) ON TRUE;

CREATE MATERIALIZED VIEW words_per_window AS
SELECT window_start, window_end, author, COUNT(*) AS words, SUM(len) AS letters
FROM TABLE(TUMBLE(TABLE words, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY window_start, window_end, author;

CREATE MATERIALIZED VIEW authors_with_lines AS
SELECT n, COUNT(*) AS authors
FROM (SELECT author, COUNT(*) AS written FROM lines GROUP BY author) AS a
CROSS JOIN LATERAL TABLE(count_to(a.written)) AS T(n)
GROUP BY n;

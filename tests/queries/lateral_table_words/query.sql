-- Python table functions (lateral_words.py, beside this file) applied per row with LATERAL TABLE,
-- in Flink's three spellings: a comma join (a generator a row at a time), a LEFT JOIN ... ON TRUE
-- (the arrow form; a line without words keeps one row of NULLs), and a CROSS JOIN over an updating
-- input (each author's line count, which grows: its retractions flow through the function). The
-- lateral join keeps the time attribute `ts`, so a TUMBLE window over its result works.
CREATE FUNCTION split_words AS 'lateral_words.split_words' LANGUAGE PYTHON;
CREATE TEMPORARY FUNCTION words_of AS 'lateral_words.words_of';
CREATE TEMPORARY SYSTEM FUNCTION count_to AS 'lateral_words.count_to' LANGUAGE PYTHON;

CREATE TABLE lines (
  ts TIMESTAMP(3), author VARCHAR, line VARCHAR,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = 'data/lines.csv', 'format' = 'csv');

CREATE TABLE words (ts TIMESTAMP(3), author VARCHAR, word VARCHAR, len INT)
WITH ('connector' = 'filesystem', 'path' = 'out/words', 'format' = 'csv');

INSERT INTO words
SELECT ts, author, word, len FROM lines, LATERAL TABLE(split_words(line)) AS T(word, len);

CREATE MATERIALIZED VIEW lower_words AS
SELECT l.ts, l.author, w.word
FROM lines AS l LEFT JOIN LATERAL TABLE(words_of(lower(l.line))) AS w(word) ON TRUE;

CREATE VIEW tokens AS SELECT ts, author, word, len FROM lines, LATERAL TABLE(split_words(line)) AS T(word, len);

CREATE MATERIALIZED VIEW words_per_window AS
SELECT window_start, window_end, author, COUNT(*) AS words, SUM(len) AS letters
FROM TABLE(TUMBLE(TABLE tokens, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY window_start, window_end, author;

CREATE MATERIALIZED VIEW authors_with_lines AS
SELECT n, COUNT(*) AS authors
FROM (SELECT author, COUNT(*) AS written FROM lines GROUP BY author) AS a
CROSS JOIN LATERAL TABLE(count_to(a.written)) AS T(n)
GROUP BY n;

-- The whole loop in SQL: a store, memories, feedback, recall (docs/sql.md).
--   sqlite3 -cmd ".load $(heapmem path)" < examples/loop.sql
-- Every call takes the demo's fixed time (2025-03-14, 1741910400), so the output
-- is the same on every run.
SELECT heap_init();

-- Maya's five memories: id, then when she said it (unix seconds)
WITH m(text, kind, source, id, days_ago) AS (VALUES
  ('Booked the flight: SFO to LIS, departs March 14, 9:40am', 'fact', 'maya', 'booking', 20),
  ('Lisbon! I''d love to visit Lisbon someday', 'preference', 'maya', 'wish', 5),
  ('Flights to Lisbon from SFO cost around $700 in spring', 'tool_result', 'tool', 'quote', 2),
  ('What is a good neighborhood to stay in Lisbon?', 'note', 'maya', 'hood', 9),
  ('Maya prefers a window seat', 'preference', 'maya', 'seat', 30))
SELECT count(heap_add(text, 'user:maya', kind, source, id, 1741910400 - days_ago * 86400))
       AS added
FROM m;

-- Other users' memories: each has a dated answer to a question of their own
WITH m(ns, text, kind, days_ago) AS (VALUES
  ('user:ana', 'Dentist appointment confirmed for Tuesday at 3:15pm', 'fact', 6),
  ('user:ana', 'I really want to find a dentist I like', 'preference', 30),
  ('user:ana', 'Dentist appointments nearby start at $90', 'tool_result', 1),
  ('user:ben', 'Train ticket: London to Paris, leaves June 2 at 7:01am', 'fact', 15),
  ('user:ben', 'Paris by train sounds lovely, I should go more', 'preference', 40),
  ('user:ben', 'Trains to Paris from London cost about $120', 'tool_result', 3),
  ('user:chen', 'Haircut booked with Sam for Friday May 9 at 11:30am', 'fact', 3),
  ('user:chen', 'I''d like a shorter haircut this summer', 'preference', 12),
  ('user:chen', 'Haircut prices downtown average $45', 'tool_result', 2),
  ('user:dara', 'Car service scheduled: Monday April 7, drop off at 8:00am', 'fact', 9),
  ('user:dara', 'I hate taking the car in for service', 'preference', 50),
  ('user:dara', 'Car service quotes start at $150', 'tool_result', 4),
  ('user:eli', 'Lease renewal starts August 1; signed on July 3 at 5pm', 'fact', 25),
  ('user:eli', 'I want a lease with a balcony next time', 'preference', 60),
  ('user:eli', 'Lease renewal fees in the area run $200 to $400', 'tool_result', 5))
SELECT count(heap_add(text, ns, kind, NULL, NULL, 1741910400 - days_ago * 86400)) AS added
FROM m;

-- Their agents ask, three times each (a second apart), and report the memory
-- the answer used: a tracked recall (heap_recall logs it) and its feedback
-- (the other memories shown count as ignored), in one statement
WITH q(ns, question, answer) AS (VALUES
  ('user:ana', 'When is my dentist appointment?', 'Dentist appointment confirmed for Tuesday at 3:15pm'),
  ('user:ben', 'When is my train to Paris?', 'Train ticket: London to Paris, leaves June 2 at 7:01am'),
  ('user:chen', 'When is my haircut?', 'Haircut booked with Sam for Friday May 9 at 11:30am'),
  ('user:dara', 'When is my car service?', 'Car service scheduled: Monday April 7, drop off at 8:00am'),
  ('user:eli', 'When does my lease renewal start?', 'Lease renewal starts August 1; signed on July 3 at 5pm')),
  rounds(n) AS (VALUES (1), (2), (3))
SELECT count(heap_feedback(r.recall_id, json_array(r.id), NULL, 1741910400 + n))
       AS feedbacks
FROM rounds, q, heap_recall(q.question, q.ns, 3, 1741910400 + n) AS r
WHERE r.text = q.answer;

-- Maya asks: her booking, which shares one word with the question, comes first
SELECT id, round(score, 3) AS score, text FROM heap_recall('When is my flight to Lisbon?', 'user:maya', 3, 1741910400);

-- A question that shares no word with the booking: the vectors find it (heap_init()
-- made a hybrid store; heap_recall embeds the question with the library's own model)
SELECT id, round(score, 3) AS score, text FROM heap_recall('What time does my plane leave?', 'user:maya', 1, 1741910400, NULL, 0);

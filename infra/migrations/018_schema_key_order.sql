-- Actions schemas keep the order their keys were written in. A target's headers go on the wire in the
-- order the schema declares them, and its `body` template comes out as written, as upstream sends
-- both (docs/compatibility.md). `jsonb` re-sorts an object's keys (shorter first, then bytewise), so
-- that order was lost before dispatch read the schema; `json` stores the text as given (lib/db/schemas.ts
-- writes it with JSON.stringify, after validation, so it never holds a duplicate key).
--
-- What this cannot recover: versions stored before it hold jsonb's order, and keep it. Their headers
-- and body keys go out sorted until the schema is stored again (`actions schema set` with the same
-- file stores a new version in the file's order); nothing else about them changes.
ALTER TABLE actions_schema ALTER COLUMN schema TYPE json USING schema::json;

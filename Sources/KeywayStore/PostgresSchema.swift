import KeywayCore

/// The fleet store's schema in PostgreSQL, versioned with forward migrations like the SQLite one (Schema.swift):
/// `keyway_schema` holds the version; `keyway store migrate` applies what is missing as the database's owner, and
/// keywayd, whose role may not change the schema, refuses a version other than its own (keywayd(8), FLEETS).
enum PostgresSchema {
    /// The migrations with each factor's part (`DatabaseSchema`: TOTP's, Plugins/TOTP/TOTPDatabase.swift) appended
    /// to its version's: what `keyway store migrate` applies.
    static func migrations(with parts: [DatabaseSchema]) -> [String] {
        core.enumerated().map { index, sql in
            parts.reduce(sql) { composed, part in
                part.migrations[index + 1].map { composed + "\n" + $0 } ?? composed
            }
        }
    }

    /// Migration N (1-based) brings the schema from version N-1 to N. Append only; never edit a shipped one.
    /// Text keys compare byte by byte (`COLLATE "C"`), as SQLite's do, whatever the database's locale.
    static let core: [String] = [
        """
        CREATE TABLE enrollments (
            account text COLLATE "C" NOT NULL,
            factor text COLLATE "C" NOT NULL,
            payload bytea NOT NULL,
            changed_at bigint NOT NULL,
            changed_by text NOT NULL,
            PRIMARY KEY (account, factor)
        );
        CREATE TABLE attempts (
            account text COLLATE "C" NOT NULL,
            factor text COLLATE "C" NOT NULL,
            failures integer NOT NULL CHECK (failures >= 0),
            last_failure bigint,
            recent_mismatches bytea NOT NULL,
            last_success bigint,
            PRIMARY KEY (account, factor)
        );
        CREATE TABLE audit (
            id bigserial PRIMARY KEY,
            at bigint NOT NULL,
            host text,
            actor text NOT NULL,
            account text COLLATE "C" NOT NULL,
            action text NOT NULL,
            factor text,
            detail text
        );
        CREATE INDEX audit_by_account ON audit (account, id);
        CREATE TABLE preferences (
            account text COLLATE "C" NOT NULL,
            key text COLLATE "C" NOT NULL,
            value text NOT NULL,
            PRIMARY KEY (account, key)
        );
        """,
        // 2: least privilege for hosts (keywayd(8), FLEETS, "Trust"). A host's role gets no table rights, only these
        // functions, which run as the owner (SECURITY DEFINER) with a fixed search_path, the schema's and then
        // pg_temp, so no object a host makes can stand in for one of ours. A caller with table rights (the owner, an
        // administrator's role, a host granted self-service) passes every rule: the rules are for hosts.
        """
        CREATE EXTENSION IF NOT EXISTS pgcrypto SCHEMA @schema;
        ALTER TABLE attempts ADD COLUMN lowered_by text, ADD COLUMN lowered_at bigint, ADD COLUMN success_xact xid8;
        ALTER TABLE audit ADD COLUMN role text DEFAULT session_user;
        CREATE TABLE sealed (factor text COLLATE "C" PRIMARY KEY, header integer NOT NULL CHECK (header >= 0));

        CREATE FUNCTION keyway_privileged() RETURNS boolean LANGUAGE sql STABLE
            SET search_path = @schema, pg_temp
            AS $$ SELECT has_table_privilege(session_user, 'enrollments', 'UPDATE') $$;

        -- What a caller may see of an enrollment's payload: a sealed factor's header alone unless it has table rights.
        CREATE FUNCTION keyway_shown(p_factor text, p_payload bytea) RETURNS bytea LANGUAGE sql STABLE
            SET search_path = @schema, pg_temp AS $$
            SELECT coalesce((SELECT substr(p_payload, 1, header) FROM sealed
                WHERE factor = p_factor AND NOT keyway_privileged()), p_payload) $$;

        CREATE FUNCTION keyway_enrollment_rows(p_account text, p_factor text)
            RETURNS TABLE (account text, factor text, payload bytea, changed_at bigint, changed_by text)
            LANGUAGE sql STABLE SECURITY DEFINER SET search_path = @schema, pg_temp AS $$
            SELECT account, factor, keyway_shown(factor, payload), changed_at, changed_by FROM enrollments
            WHERE account = p_account AND (p_factor IS NULL OR factor = p_factor) ORDER BY factor $$;

        CREATE FUNCTION keyway_enrollments_of(p_factor text)
            RETURNS TABLE (account text, factor text, payload bytea, changed_at bigint, changed_by text)
            LANGUAGE sql STABLE SECURITY DEFINER SET search_path = @schema, pg_temp AS $$
            SELECT account, factor, keyway_shown(factor, payload), changed_at, changed_by FROM enrollments
            WHERE factor = p_factor ORDER BY account $$;

        CREATE FUNCTION keyway_attempt_rows(p_account text)
            RETURNS TABLE (factor text, failures integer, last_failure bigint, recent_mismatches bytea,
                last_success bigint)
            LANGUAGE sql STABLE SECURITY DEFINER SET search_path = @schema, pg_temp AS $$
            SELECT factor, failures, last_failure, recent_mismatches, last_success FROM attempts
            WHERE account = p_account $$;

        CREATE FUNCTION keyway_preference_rows(p_account text) RETURNS TABLE (key text, value text)
            LANGUAGE sql STABLE SECURITY DEFINER SET search_path = @schema, pg_temp AS $$
            SELECT key, value FROM preferences WHERE account = p_account $$;

        -- One factor's counters, as a host may change them: a failure may be counted freely; a counter may fall
        -- only in a transaction that records a success of the account (its row written first, when it last
        -- succeeded moved forward and not into the future) or by one, as the refund of a repeated wrong secret;
        -- when a factor last succeeded never moves back. Each fall is stamped with the role and the database's
        -- time.
        \(putAttempts(replacing: false, futureMargin: 300_000))

        -- Whether p_new is p_old with one use taken out, as a host may swap it: a recovery set with one hash gone
        -- (Plugins/Recovery: a version byte, the count made, the hashes one per line); a pass with one use fewer
        -- (Sources/KeywayCore/TemporaryPass.swift: six lines, the fourth the uses left); security keys whose
        -- signature counters and clone marks only went up (Plugins/FIDO2: a version byte, a count, then per key
        -- a name, an id, an algorithm, a public key, each field a 4-byte length and its bytes, then a 4-byte
        -- counter and a flag byte). Anything else (another factor, a new set, a new key) is not a use.
        CREATE FUNCTION keyway_is_use(p_factor text, p_old bytea, p_new bytea) RETURNS boolean
            LANGUAGE plpgsql IMMUTABLE SET search_path = @schema, pg_temp AS $$
        DECLARE
            old_list text[];
            new_list text[];
            place_at integer := 2;
            length_of integer;
            counter_at integer;
            masked_old bytea := p_old;
            masked_new bytea := p_new;
        BEGIN
            IF p_factor = 'recovery' THEN
                IF substr(p_old, 1, 2) <> substr(p_new, 1, 2) OR get_byte(p_old, 0) <> 1 THEN RETURN false; END IF;
                old_list := string_to_array(convert_from(substr(p_old, 3), 'UTF8'), E'\\n');
                new_list := string_to_array(convert_from(substr(p_new, 3), 'UTF8'), E'\\n');
                RETURN cardinality(new_list) = cardinality(old_list) - 1 AND new_list <@ old_list;
            ELSIF p_factor = 'pass' THEN
                old_list := string_to_array(convert_from(p_old, 'UTF8'), E'\\n');
                new_list := string_to_array(convert_from(p_new, 'UTF8'), E'\\n');
                RETURN cardinality(old_list) = 6 AND cardinality(new_list) = 6 AND old_list[1] = '1'
                    AND old_list[1:3] = new_list[1:3] AND old_list[5:6] = new_list[5:6]
                    AND new_list[4] ~ '^[0-9]{1,9}$' AND old_list[4] ~ '^[0-9]{1,9}$'
                    AND new_list[4]::integer = old_list[4]::integer - 1 AND new_list[4]::integer >= 0;
            ELSIF p_factor = 'fido2' THEN
                IF length(p_old) <> length(p_new) OR substr(p_old, 1, 2) <> substr(p_new, 1, 2)
                    OR get_byte(p_old, 0) <> 1
                THEN
                    RETURN false;
                END IF;
                FOR key IN 1 .. get_byte(p_old, 1) LOOP
                    FOR field IN 1 .. 4 LOOP
                        IF field = 3 THEN  -- the algorithm: four bytes
                            place_at := place_at + 4;
                            CONTINUE;
                        END IF;
                        length_of := (get_byte(p_old, place_at)::bigint << 24) | (get_byte(p_old, place_at + 1) << 16)
                            | (get_byte(p_old, place_at + 2) << 8) | get_byte(p_old, place_at + 3);
                        place_at := place_at + 4 + length_of;
                    END LOOP;
                    counter_at := place_at;
                    IF substr(p_new, counter_at + 1, 4) < substr(p_old, counter_at + 1, 4)
                        OR get_byte(p_new, counter_at + 4) NOT IN (0, 1)
                        OR get_byte(p_new, counter_at + 4) < get_byte(p_old, counter_at + 4)
                    THEN
                        RETURN false;
                    END IF;
                    masked_old := overlay(masked_old PLACING '\\x0000000000'::bytea FROM counter_at + 1 FOR 5);
                    masked_new := overlay(masked_new PLACING '\\x0000000000'::bytea FROM counter_at + 1 FOR 5);
                    place_at := counter_at + 5;
                END LOOP;
                RETURN place_at = length(p_old) AND masked_old = masked_new;
            END IF;
            RETURN false;
        END $$;

        -- A single-use secret spent (a recovery code, a pass, a security key's counter): the record swapped only
        -- if it is still p_old, with its audit row. A host may swap a record only for the same one with a use
        -- taken out (keyway_is_use), keeping when and by whom it was made, recorded as a use or a mark.
        CREATE FUNCTION keyway_replace(p_account text, p_factor text, p_old bytea, p_new bytea, p_changed_at bigint,
            p_changed_by text, p_at bigint, p_host text, p_actor text, p_action text, p_detail text)
            RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER SET search_path = @schema, pg_temp AS $$
        DECLARE
            old enrollments%ROWTYPE;
        BEGIN
            SELECT * INTO old FROM enrollments WHERE account = p_account AND factor = p_factor FOR UPDATE;
            IF NOT FOUND OR old.payload <> p_old THEN RETURN false; END IF;
            IF NOT keyway_privileged() AND (NOT keyway_is_use(p_factor, old.payload, p_new)
                OR p_action NOT IN ('use', 'mark') OR p_changed_at <> old.changed_at
                OR p_changed_by <> old.changed_by)
            THEN
                RAISE EXCEPTION 'a host may not change the % of %: only an administrator''s role changes '
                    'enrollments', p_factor, p_account USING ERRCODE = '42501';
            END IF;
            UPDATE enrollments SET payload = p_new, changed_at = p_changed_at, changed_by = p_changed_by
            WHERE account = p_account AND factor = p_factor;
            INSERT INTO audit (at, host, actor, account, action, factor, detail)
            VALUES (p_at, p_host, p_actor, p_account, p_action, p_factor, p_detail);
            RETURN true;
        END $$;

        -- Counters of names without an enrollment, beyond the latest p_limit, none that decides anything
        -- (Store.pruneCounters): what a host may clear.
        \(pruneCounters(replacing: false, deciding: "p_deciding"))

        REVOKE ALL ON FUNCTION keyway_privileged(), keyway_shown(text, bytea), keyway_enrollment_rows(text, text),
            keyway_enrollments_of(text),
            keyway_attempt_rows(text), keyway_preference_rows(text),
            keyway_put_attempts(text, text, integer, bigint, bytea, bigint),
            keyway_is_use(text, bytea, bytea),
            keyway_replace(text, text, bytea, bytea, bigint, text, bigint, text, text, text, text),
            keyway_prune_counters(integer, integer) FROM PUBLIC;
        """,
        // 3: the names a lockout can be on, for keywayd's metrics (keyway_locked_accounts); a host reads no table.
        """
        CREATE FUNCTION keyway_failing_accounts(p_least integer, p_limit integer) RETURNS SETOF text
            LANGUAGE sql STABLE SECURITY DEFINER SET search_path = @schema, pg_temp AS $$
            SELECT DISTINCT account FROM attempts WHERE failures >= p_least ORDER BY account
            LIMIT greatest(p_limit, 0) $$;
        REVOKE ALL ON FUNCTION keyway_failing_accounts(integer, integer) FROM PUBLIC;
        """,
        // 4: promises a host's role cannot undo (keywayd(8), FLEETS, "Trust"; docs/ARCHITECTURE.md §17). A code is
        // checked only once its reservation was committed by an earlier transaction, so what the caller does with
        // its own transaction (a rollback, a savepoint, an exception block) cannot give a count back; the window is
        // the database's; the budget counts wrong codes per role and channel, so neither a host nor a stranger
        // through one spends another's; a code's step is marked used by the database, so no success is dated in
        // the future; a use's time and host are the database's and the role's.
        """
        CREATE TABLE host_names (role text PRIMARY KEY, host text NOT NULL);
        CREATE INDEX audit_by_role ON audit (role, at);

        -- As in migration 2, with no success more than 2 s (clock skew) ahead of the database's clock: a one-time
        -- code's step is now the database's mark (code_marks), never a success in the future.
        \(putAttempts(replacing: true, futureMargin: 2000))

        -- As in migration 2, with a recovery set compared as a list (one hash taken out where it was, so a hash
        -- cannot be kept twice) and a security key's signature counter raised by at most 65,536 per use.
        CREATE OR REPLACE FUNCTION keyway_is_use(p_factor text, p_old bytea, p_new bytea) RETURNS boolean
            LANGUAGE plpgsql IMMUTABLE SET search_path = @schema, pg_temp AS $$
        DECLARE
            old_list text[];
            new_list text[];
            place_at integer := 2;
            length_of integer;
            counter_at integer;
            old_counter bigint;
            new_counter bigint;
            masked_old bytea := p_old;
            masked_new bytea := p_new;
        BEGIN
            IF p_factor = 'recovery' THEN
                IF substr(p_old, 1, 2) <> substr(p_new, 1, 2) OR get_byte(p_old, 0) <> 1 THEN RETURN false; END IF;
                old_list := string_to_array(convert_from(substr(p_old, 3), 'UTF8'), E'\\n');
                new_list := string_to_array(convert_from(substr(p_new, 3), 'UTF8'), E'\\n');
                IF cardinality(new_list) <> cardinality(old_list) - 1 THEN RETURN false; END IF;
                FOR gone IN 1 .. cardinality(old_list) LOOP
                    IF new_list IS NOT DISTINCT FROM old_list[1:gone - 1] || old_list[gone + 1:] THEN RETURN true; END IF;
                END LOOP;
                RETURN false;
            ELSIF p_factor = 'pass' THEN
                old_list := string_to_array(convert_from(p_old, 'UTF8'), E'\\n');
                new_list := string_to_array(convert_from(p_new, 'UTF8'), E'\\n');
                RETURN cardinality(old_list) = 6 AND cardinality(new_list) = 6 AND old_list[1] = '1'
                    AND old_list[1:3] = new_list[1:3] AND old_list[5:6] = new_list[5:6]
                    AND new_list[4] ~ '^[0-9]{1,9}$' AND old_list[4] ~ '^[0-9]{1,9}$'
                    AND new_list[4]::integer = old_list[4]::integer - 1 AND new_list[4]::integer >= 0;
            ELSIF p_factor = 'fido2' THEN
                IF length(p_old) <> length(p_new) OR substr(p_old, 1, 2) <> substr(p_new, 1, 2)
                    OR get_byte(p_old, 0) <> 1
                THEN
                    RETURN false;
                END IF;
                FOR key IN 1 .. get_byte(p_old, 1) LOOP
                    FOR field IN 1 .. 4 LOOP
                        IF field = 3 THEN  -- the algorithm: four bytes
                            place_at := place_at + 4;
                            CONTINUE;
                        END IF;
                        length_of := (get_byte(p_old, place_at)::bigint << 24) | (get_byte(p_old, place_at + 1) << 16)
                            | (get_byte(p_old, place_at + 2) << 8) | get_byte(p_old, place_at + 3);
                        place_at := place_at + 4 + length_of;
                    END LOOP;
                    counter_at := place_at;
                    old_counter := (get_byte(p_old, counter_at)::bigint << 24)
                        | (get_byte(p_old, counter_at + 1)::bigint << 16)
                        | (get_byte(p_old, counter_at + 2)::bigint << 8) | get_byte(p_old, counter_at + 3)::bigint;
                    new_counter := (get_byte(p_new, counter_at)::bigint << 24)
                        | (get_byte(p_new, counter_at + 1)::bigint << 16)
                        | (get_byte(p_new, counter_at + 2)::bigint << 8) | get_byte(p_new, counter_at + 3)::bigint;
                    IF new_counter < old_counter OR new_counter > old_counter + 65536
                        OR get_byte(p_new, counter_at + 4) NOT IN (0, 1)
                        OR get_byte(p_new, counter_at + 4) < get_byte(p_old, counter_at + 4)
                    THEN
                        RETURN false;
                    END IF;
                    masked_old := overlay(masked_old PLACING '\\x0000000000'::bytea FROM counter_at + 1 FOR 5);
                    masked_new := overlay(masked_new PLACING '\\x0000000000'::bytea FROM counter_at + 1 FOR 5);
                    place_at := counter_at + 5;
                END LOOP;
                RETURN place_at = length(p_old) AND masked_old = masked_new;
            END IF;
            RETURN false;
        END $$;

        -- As in migration 2, with a host's use written at the database's time, under the host name the
        -- administrator gave its role (host_names; the role's own name without one), only when it changes the
        -- record, and at most 120 a minute per role.
        CREATE OR REPLACE FUNCTION keyway_replace(p_account text, p_factor text, p_old bytea, p_new bytea,
            p_changed_at bigint, p_changed_by text, p_at bigint, p_host text, p_actor text, p_action text,
            p_detail text)
            RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER SET search_path = @schema, pg_temp AS $$
        DECLARE
            old enrollments%ROWTYPE;
            now_ms bigint := (extract(epoch FROM clock_timestamp()) * 1000)::bigint;
            v_at bigint := p_at;
            v_host text := p_host;
        BEGIN
            SELECT * INTO old FROM enrollments WHERE account = p_account AND factor = p_factor FOR UPDATE;
            IF NOT FOUND OR old.payload <> p_old THEN RETURN false; END IF;
            IF NOT keyway_privileged() THEN
                IF p_new = old.payload OR NOT keyway_is_use(p_factor, old.payload, p_new)
                    OR p_action NOT IN ('use', 'mark') OR p_changed_at <> old.changed_at
                    OR p_changed_by <> old.changed_by
                THEN
                    RAISE EXCEPTION 'a host may not change the % of %: only an administrator''s role changes '
                        'enrollments', p_factor, p_account USING ERRCODE = '42501';
                END IF;
                IF (SELECT count(*) FROM audit WHERE role = session_user AND audit.at > now_ms - 60000) >= 120 THEN
                    RAISE EXCEPTION 'more than 120 uses a minute from %', session_user USING ERRCODE = 'KWB01';
                END IF;
                v_at := now_ms;
                v_host := coalesce((SELECT h.host FROM host_names h WHERE h.role = session_user), session_user);
            END IF;
            UPDATE enrollments SET payload = p_new, changed_at = p_changed_at, changed_by = p_changed_by
            WHERE account = p_account AND factor = p_factor;
            INSERT INTO audit (at, host, actor, account, action, factor, detail)
            VALUES (v_at, v_host, p_actor, p_account, p_action, p_factor, p_detail);
            RETURN true;
        END $$;

        -- As in migration 2, deciding by Keyway's own constant (AttemptState.deciding, 5 failures), whatever the
        -- caller passes as p_deciding: a host cannot have a counter that decides something pruned.
        \(pruneCounters(replacing: true, deciding: "5"))
        """,
        // 5: the store knows no factor's format (docs/ARCHITECTURE.md §17, "Spendable parts"). What a use changes of
        // a record (uses left, a signature counter, a clone mark) is kept apart from the rest as rows, each with its
        // rule, written by the factor's own split (SpendableLayout) when the record is enrolled, copied or migrated
        // (PostgresStore.migrate splits the records already here). A host changes a record only by one use of one
        // row, judged by the row's rule (keyway_spend); no function parses a factor's bytes any more.
        """
        CREATE TABLE spendables (
            account text COLLATE "C" NOT NULL,
            factor text COLLATE "C" NOT NULL,
            position integer NOT NULL CHECK (position >= 0),
            name text NOT NULL CHECK (name <> '' AND strpos(name, E'\\n') = 0),
            value bigint NOT NULL CHECK (value >= 0),
            rule text NOT NULL CHECK (rule IN ('falls', 'rises')),
            step bigint CHECK (step > 0),
            ceiling bigint CHECK (ceiling >= 0),
            CHECK ((rule = 'falls') = (step IS NULL AND ceiling IS NULL)),
            CHECK (value <= ceiling OR ceiling IS NULL),
            PRIMARY KEY (account, factor, position),
            FOREIGN KEY (account, factor) REFERENCES enrollments (account, factor) ON DELETE CASCADE
        );

        -- The spendable parts of an account's records (of one factor, or all), in each record's order.
        CREATE FUNCTION keyway_spendable_rows(p_account text, p_factor text)
            RETURNS TABLE (account text, factor text, name text, value bigint, rule text, step bigint, ceiling bigint)
            LANGUAGE sql STABLE SECURITY DEFINER SET search_path = @schema, pg_temp AS $$
            SELECT account, factor, name, value, rule, step, ceiling FROM spendables
            WHERE account = p_account AND (p_factor IS NULL OR factor = p_factor) ORDER BY factor, position $$;

        -- The spendable parts of every record of one factor, in each record's order.
        CREATE FUNCTION keyway_spendables_of(p_factor text)
            RETURNS TABLE (account text, factor text, name text, value bigint, rule text, step bigint, ceiling bigint)
            LANGUAGE sql STABLE SECURITY DEFINER SET search_path = @schema, pg_temp AS $$
            SELECT account, factor, name, value, rule, step, ceiling FROM spendables
            WHERE factor = p_factor ORDER BY account, position $$;

        -- One use of a record, as any role makes it: the record still the one the caller read (its fixed part and
        -- when it was made), and one part named p_name taken from p_from to p_to as its rule allows ("falls": by
        -- exactly one, never below 0; "rises": by 1 to step, never beyond ceiling). A p_name of NULL is a use that
        -- changes nothing (a key that keeps no counter): true while the record is current, and nothing written.
        -- False when the record or the part is no longer what the caller read (another use came first). The audit
        -- row is dated by the database; a host's is under the name the administrator gave its role (host_names),
        -- at most 120 a minute per role.
        CREATE FUNCTION keyway_spend(p_account text, p_factor text, p_fixed bytea, p_changed_at bigint,
            p_name text, p_from bigint, p_to bigint, p_host text, p_actor text, p_action text, p_detail text)
            RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER SET search_path = @schema, pg_temp AS $$
        DECLARE
            old enrollments%ROWTYPE;
            part spendables%ROWTYPE;
            allowed boolean;
            now_ms bigint := (extract(epoch FROM clock_timestamp()) * 1000)::bigint;
            v_host text := p_host;
        BEGIN
            IF p_action IS DISTINCT FROM 'use' AND p_action IS DISTINCT FROM 'mark' THEN
                RAISE EXCEPTION 'a spent part is recorded as a use or a mark, not %', p_action USING ERRCODE = '22023';
            END IF;
            SELECT * INTO old FROM enrollments WHERE account = p_account AND factor = p_factor FOR UPDATE;
            IF NOT FOUND OR old.payload <> p_fixed OR old.changed_at <> p_changed_at THEN RETURN false; END IF;
            IF p_name IS NULL THEN RETURN true; END IF;
            SELECT * INTO part FROM spendables s
            WHERE s.account = p_account AND s.factor = p_factor AND s.name = p_name AND s.value = p_from
            ORDER BY s.position LIMIT 1 FOR UPDATE;
            IF NOT FOUND THEN RETURN false; END IF;
            -- (Computed first: PL/pgSQL ends an IF's condition at the first THEN, a CASE's included.)
            allowed := CASE part.rule
                WHEN 'falls' THEN p_to = part.value - 1 AND p_to >= 0
                ELSE p_to > part.value AND p_to - part.value <= part.step AND p_to <= part.ceiling END;
            IF NOT allowed THEN
                RAISE EXCEPTION 'one use of the % of % may not take "%" from % to % (its rule: %)', p_factor,
                    p_account, p_name, p_from, p_to, CASE part.rule WHEN 'falls' THEN 'falls by one'
                    ELSE format('rises by at most %s, to at most %s', part.step, part.ceiling) END
                    USING ERRCODE = '42501';
            END IF;
            IF NOT keyway_privileged() THEN
                IF (SELECT count(*) FROM audit WHERE role = session_user AND audit.at > now_ms - 60000) >= 120 THEN
                    RAISE EXCEPTION 'more than 120 uses a minute from %', session_user USING ERRCODE = 'KWB01';
                END IF;
                v_host := coalesce((SELECT h.host FROM host_names h WHERE h.role = session_user), session_user);
            END IF;
            UPDATE spendables SET value = p_to
            WHERE account = p_account AND factor = p_factor AND position = part.position;
            INSERT INTO audit (at, host, actor, account, action, factor, detail)
            VALUES (now_ms, v_host, p_actor, p_account, p_action, p_factor, p_detail);
            RETURN true;
        END $$;

        -- As in migration 4, for an administrator's role alone: a host changes a record only by spending one use of
        -- it (keyway_spend).
        CREATE OR REPLACE FUNCTION keyway_replace(p_account text, p_factor text, p_old bytea, p_new bytea,
            p_changed_at bigint, p_changed_by text, p_at bigint, p_host text, p_actor text, p_action text,
            p_detail text)
            RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER SET search_path = @schema, pg_temp AS $$
        DECLARE
            old enrollments%ROWTYPE;
        BEGIN
            IF NOT keyway_privileged() THEN
                RAISE EXCEPTION 'a host may not change the % of %: it spends one use of a record (keyway_spend); '
                    'only an administrator''s role changes enrollments', p_factor, p_account USING ERRCODE = '42501';
            END IF;
            SELECT * INTO old FROM enrollments WHERE account = p_account AND factor = p_factor FOR UPDATE;
            IF NOT FOUND OR old.payload <> p_old THEN RETURN false; END IF;
            UPDATE enrollments SET payload = p_new, changed_at = p_changed_at, changed_by = p_changed_by
            WHERE account = p_account AND factor = p_factor;
            INSERT INTO audit (at, host, actor, account, action, factor, detail)
            VALUES (p_at, p_host, p_actor, p_account, p_action, p_factor, p_detail);
            RETURN true;
        END $$;
        DROP FUNCTION keyway_is_use(text, bytea, bytea);

        REVOKE ALL ON FUNCTION keyway_spendable_rows(text, text), keyway_spendables_of(text),
            keyway_spend(text, text, bytea, bigint, text, bigint, bigint, text, text, text, text) FROM PUBLIC;
        -- Grants follow the functions a host already had: every role that could read a record reads its parts and
        -- spends them.
        \(DatabaseSchema.grants(
            following: "keyway_enrollment_rows",
            of: "keyway_spendable_rows(text, text), keyway_spendables_of(text), "
                + "keyway_spend(text, text, bytea, bigint, text, bigint, bigint, text, text, text, text)"))
        """,
    ]

    /// keyway_put_attempts (migration 2, restated by 4 with a smaller margin): a success may be at most
    /// `futureMargin` milliseconds ahead of the database's clock.
    static func putAttempts(replacing: Bool, futureMargin: Int) -> String {
        """
        CREATE \(replacing ? "OR REPLACE " : "")FUNCTION keyway_put_attempts(p_account text, p_factor text, p_failures integer,
            p_last_failure bigint, p_mismatches bytea, p_last_success bigint) RETURNS void
            LANGUAGE plpgsql SECURITY DEFINER SET search_path = @schema, pg_temp AS $$
        DECLARE
            old attempts%ROWTYPE;
            now_ms bigint := (extract(epoch FROM clock_timestamp()) * 1000)::bigint;
            success boolean;
            lowered boolean;
        BEGIN
            SELECT * INTO old FROM attempts WHERE account = p_account AND factor = p_factor FOR UPDATE;
            success := p_last_success IS NOT NULL AND p_last_success > coalesce(old.last_success, -1);
            lowered := p_failures < coalesce(old.failures, 0);
            IF NOT keyway_privileged() THEN
                IF p_failures < 0 OR p_last_success IS DISTINCT FROM old.last_success AND NOT success THEN
                    RAISE EXCEPTION 'a host may not move back when % of % last succeeded', p_factor, p_account
                        USING ERRCODE = '42501';
                END IF;
                IF success AND p_last_success > now_ms + \(futureMargin) THEN
                    RAISE EXCEPTION 'a host may not record a success of % of % in the future', p_factor, p_account
                        USING ERRCODE = '42501';
                END IF;
                IF lowered AND NOT success
                    AND NOT EXISTS (SELECT 1 FROM attempts WHERE account = p_account
                        AND success_xact = pg_current_xact_id())
                    AND NOT (p_failures = old.failures - 1
                        AND EXISTS (SELECT 1 FROM attempts WHERE account = p_account AND recent_mismatches <> ''))
                THEN
                    RAISE EXCEPTION 'a host lowers the counter of % of % only with a success or the refund of a '
                        'repeated wrong secret', p_factor, p_account USING ERRCODE = '42501';
                END IF;
            ELSIF p_failures = 0 AND p_last_failure IS NULL AND p_mismatches = '' AND p_last_success IS NULL THEN
                DELETE FROM attempts WHERE account = p_account AND factor = p_factor;
                RETURN;
            END IF;
            INSERT INTO attempts AS a (account, factor, failures, last_failure, recent_mismatches, last_success,
                lowered_by, lowered_at, success_xact)
            VALUES (p_account, p_factor, p_failures, p_last_failure, p_mismatches, p_last_success,
                CASE WHEN lowered THEN session_user END, CASE WHEN lowered THEN now_ms END,
                CASE WHEN success THEN pg_current_xact_id() END)
            ON CONFLICT (account, factor) DO UPDATE SET failures = excluded.failures,
                last_failure = excluded.last_failure, recent_mismatches = excluded.recent_mismatches,
                last_success = excluded.last_success,
                lowered_by = coalesce(excluded.lowered_by, a.lowered_by),
                lowered_at = coalesce(excluded.lowered_at, a.lowered_at),
                success_xact = coalesce(excluded.success_xact, a.success_xact);
        END $$;
        """
    }

    /// keyway_prune_counters (migration 2, restated by 4): names whose counters reach `deciding` failures are kept.
    static func pruneCounters(replacing: Bool, deciding: String) -> String {
        """
        CREATE \(replacing ? "OR REPLACE " : "")FUNCTION keyway_prune_counters(p_deciding integer, p_limit integer) RETURNS bigint
            LANGUAGE sql SECURITY DEFINER SET search_path = @schema, pg_temp AS $$
            WITH doomed AS (SELECT account FROM attempts a WHERE NOT EXISTS
                (SELECT 1 FROM enrollments e WHERE e.account = a.account) GROUP BY account
                HAVING max(failures) < \(deciding) ORDER BY max(coalesce(last_failure, 0)) DESC, account
                OFFSET greatest(p_limit, 0)),
            gone AS (DELETE FROM attempts WHERE account IN (SELECT account FROM doomed) RETURNING account)
            SELECT count(DISTINCT account) FROM gone $$;
        """
    }

    /// The newest schema this build knows.
    static var currentVersion: Int { core.count }

    /// What a host's role is granted (`Grant.host`): the schema's version and the functions of migration 2 and later,
    /// the parts' included, no table; revoked first, so a role granted more by an older Keyway is brought down to
    /// this. A role granted self-service (`Grant.writer`) also gets the tables' rows, as every role did before
    /// migration 2.
    static func grants(to role: String, _ grant: Grant, parts: [DatabaseSchema]) -> String {
        let functions =
            [
                "keyway_privileged()", "keyway_enrollment_rows(text, text)", "keyway_enrollments_of(text)",
                "keyway_attempt_rows(text)", "keyway_preference_rows(text)",
                "keyway_put_attempts(text, text, integer, bigint, bytea, bigint)",
                "keyway_replace(text, text, bytea, bytea, bigint, text, bigint, text, text, text, text)",
                "keyway_spendable_rows(text, text)", "keyway_spendables_of(text)",
                "keyway_spend(text, text, bytea, bigint, text, bigint, bigint, text, text, text, text)",
                "keyway_prune_counters(integer, integer)", "keyway_failing_accounts(integer, integer)",
            ] + parts.flatMap { $0.hostFunctions }
        let tables =
            ["enrollments", "attempts", "audit", "preferences", "sealed", "host_names", "spendables"]
            + parts.flatMap { $0.tables }
        var sql = """
            REVOKE ALL ON \(tables.joined(separator: ", ")) FROM \(role);
            REVOKE ALL ON SEQUENCE audit_id_seq FROM \(role);
            GRANT SELECT ON keyway_schema TO \(role);
            GRANT EXECUTE ON FUNCTION \(functions.joined(separator: ", ")) TO \(role);
            """
        switch grant {
        case .host: break
        case .writer:
            sql += """

                GRANT SELECT, INSERT, UPDATE, DELETE ON enrollments, attempts, audit, preferences, spendables TO \(role);
                GRANT USAGE ON SEQUENCE audit_id_seq TO \(role);
                """
        }
        return sql
    }

    /// What a role may do in the fleet's database.
    enum Grant {
        /// A host: read what a verification needs, count and settle attempts, spend single-use secrets.
        case host
        /// A host with self-service, or an administrator: every row as well.
        case writer
    }

    /// The advisory lock that serializes migrations: the two-key form, a key space apart from the accounts' locks.
    static let migrationLock = "SELECT pg_advisory_xact_lock(19301, 31095)"
}

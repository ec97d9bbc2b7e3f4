"""JDBC (pgjdbc, Debian libpostgresql-jdbc-java): every DatabaseMetaData method DBeaver,
DataGrip and Metabase browse with (getSchemas, getCatalogs, getTables, getColumns,
getPrimaryKeys, getIndexInfo, getTypeInfo, getFunctions, getTableTypes), generated keys
from a SERIAL column, PreparedStatement setters (setInt, setLong, setString, setDouble,
setBoolean, setTimestamp, setDate, setNull) and a fetch size.  A small Java program is
compiled here; it prints one line per call, checked below against the schema."""
import os
import subprocess

JAR = "/usr/share/java/postgresql.jar"

JAVA = r"""
import java.sql.*;
import java.util.*;

public class JdbcMeta {
    static void out(String s) { System.out.println(s); }
    interface Call { void run() throws Exception; }
    static void step(String name, Call c) {
        try { c.run(); } catch (Exception e) {
            out("FAIL " + name + ": " + e.getMessage().replace('\n', ' '));
        }
    }
    static String rows(ResultSet rs, String... cols) throws SQLException {
        List<String> l = new ArrayList<>();
        while (rs.next()) {
            StringBuilder b = new StringBuilder();
            for (String c : cols) b.append(b.length() > 0 ? "," : "").append(rs.getString(c));
            l.add(b.toString());
        }
        rs.close();
        return String.join(";", l);
    }
    public static void main(String[] a) throws Exception {
        Properties p = new Properties();
        p.setProperty("user", a[1]);
        Connection c = DriverManager.getConnection("jdbc:postgresql://127.0.0.1:" + a[0] + "/" + a[2], p);
        DatabaseMetaData m = c.getMetaData();
        try (Statement s = c.createStatement()) {
            s.execute("CREATE TABLE jdbc_parts (part_id serial PRIMARY KEY, label varchar(20) NOT NULL, " +
                      "weight float8, made timestamptz, ok boolean, n bigint)");
            s.execute("CREATE INDEX jdbc_parts_label_idx ON jdbc_parts (label)");
        }
        step("getSchemas", () -> out("SCHEMAS " + rows(m.getSchemas(), "TABLE_SCHEM")));
        step("getCatalogs", () -> out("CATALOGS " + rows(m.getCatalogs(), "TABLE_CAT")));
        step("getTableTypes", () -> out("TABLETYPES " + (rows(m.getTableTypes(), "TABLE_TYPE").contains("TABLE") ? "ok" : "none")));
        step("getTables", () -> out("TABLES " + rows(m.getTables(null, "public", "jdbc_%", new String[]{"TABLE"}), "TABLE_NAME", "TABLE_TYPE")));
        step("getColumns", () -> out("COLUMNS " + rows(m.getColumns(null, "public", "jdbc_parts", "%"),
                                                        "COLUMN_NAME", "TYPE_NAME", "NULLABLE", "ORDINAL_POSITION", "IS_AUTOINCREMENT")));
        step("getPrimaryKeys", () -> out("PKEYS " + rows(m.getPrimaryKeys(null, "public", "jdbc_parts"), "COLUMN_NAME", "KEY_SEQ", "PK_NAME")));
        step("getIndexInfo", () -> out("INDEXES " + rows(m.getIndexInfo(null, "public", "jdbc_parts", false, false),
                                                         "INDEX_NAME", "NON_UNIQUE", "COLUMN_NAME")));
        step("getTypeInfo", () -> {
            String t = rows(m.getTypeInfo(), "TYPE_NAME");
            out("TYPEINFO " + (t.contains("int8") && t.contains("text") && t.contains("timestamptz") ? "ok" : t));
        });
        step("getFunctions", () -> out("FUNCTIONS " + (rows(m.getFunctions(null, "pg_catalog", "nextval"), "FUNCTION_NAME"))));
        step("generatedKeys", () -> {
            try (PreparedStatement ps = c.prepareStatement("INSERT INTO jdbc_parts (label, weight, made, ok, n) VALUES (?, ?, ?, ?, ?)",
                                                           Statement.RETURN_GENERATED_KEYS)) {
                List<String> keys = new ArrayList<>();
                for (int i = 0; i < 3; i++) {
                    ps.setString(1, "part" + i);
                    ps.setDouble(2, 1.5 * i);
                    ps.setTimestamp(3, Timestamp.valueOf("2024-01-0" + (i + 1) + " 10:00:00"));
                    ps.setBoolean(4, i % 2 == 0);
                    if (i == 2) ps.setNull(5, Types.BIGINT); else ps.setLong(5, 10L * i);
                    ps.executeUpdate();
                    ResultSet k = ps.getGeneratedKeys();
                    k.next();
                    keys.add(k.getString("part_id"));
                }
                out("KEYS " + String.join(",", keys));
            }
        });
        step("setDate", () -> {
            try (PreparedStatement ps = c.prepareStatement("SELECT count(*) FROM jdbc_parts WHERE made >= ?")) {
                ps.setDate(1, java.sql.Date.valueOf("2024-01-02"));
                ResultSet rs = ps.executeQuery();
                rs.next();
                out("SETDATE " + rs.getLong(1));
            }
        });
        step("setInt", () -> {
            try (PreparedStatement ps = c.prepareStatement("SELECT label FROM jdbc_parts WHERE part_id = ?")) {
                ps.setInt(1, 2);
                out("SETINT " + rows(ps.executeQuery(), "label"));
            }
        });
        step("fetchSize", () -> {
            c.setAutoCommit(false);
            try (PreparedStatement ps = c.prepareStatement("SELECT part_id FROM jdbc_parts ORDER BY part_id")) {
                ps.setFetchSize(1);
                out("FETCH " + rows(ps.executeQuery(), "part_id"));
            }
            c.commit();
            c.setAutoCommit(true);
        });
        c.close();
        out("DONE");
    }
}
"""


def run(ctx):
    if not ctx.check(os.path.exists(JAR), "the JDBC driver is installed (%s)" % JAR):
        return
    src = os.path.join(ctx.work, "JdbcMeta.java")
    with open(src, "w") as f:
        f.write(JAVA)
    p = subprocess.run(["javac", "-d", ctx.work, src], capture_output=True, text=True, timeout=300)
    if not ctx.check(p.returncode == 0, "javac: %s" % p.stderr[-800:]):
        return
    def java(port, user, db):
        p = subprocess.run(["java", "-cp", "%s:%s" % (ctx.work, JAR), "JdbcMeta", str(port), user, db],
                           capture_output=True, text=True, timeout=300)
        out = p.stdout.splitlines()
        return p, out, {ln.split(" ", 1)[0]: ln.split(" ", 1)[1] if " " in ln else "" for ln in out}

    p, out, got = java(ctx.srv.pg_port, "tester", "quarry")
    ctx.check(p.returncode == 0 and "DONE" in out, "the JDBC program ran: %s" % p.stderr[-1500:])
    fails = [ln for ln in out if ln.startswith("FAIL")]
    ctx.check(not fails, "no DatabaseMetaData / statement call failed: %r" % fails)
    # the oracle: the same program against PostgreSQL 15
    pg = ctx.postgres()
    pp, pout, want = java(pg.port, "postgres", "postgres")
    ctx.check(pp.returncode == 0 and "DONE" in pout and not any(ln.startswith("FAIL") for ln in pout),
              "the JDBC program ran on PostgreSQL: %s %r" % (pp.stderr[-800:], pout))
    ctx.check(got.get("SCHEMAS", "").split(";") == ["information_schema", "pg_catalog", "public"],
              "getSchemas: %r" % got.get("SCHEMAS"))
    ctx.check(got.get("CATALOGS") == "quarry", "getCatalogs: %r" % got.get("CATALOGS"))
    for key in ("TABLETYPES", "TABLES", "COLUMNS", "PKEYS", "TYPEINFO", "FUNCTIONS", "KEYS",
                "SETDATE", "SETINT", "FETCH"):
        ctx.check(got.get(key) is not None and got.get(key) == want.get(key),
                  "%s as PostgreSQL: %r, PostgreSQL %r" % (key, got.get(key), want.get(key)))
    ctx.check(sorted((got.get("INDEXES") or "").split(";")) == sorted((want.get("INDEXES") or "-").split(";")),
              "INDEXES as PostgreSQL: %r, PostgreSQL %r" % (got.get("INDEXES"), want.get("INDEXES")))

/*
 * tune_prepare.c - a problem made ready to measure for `kerntune tune`: the device its Language
 * asks for (or a stand-in: a replay, a fleet), its data on the device, the op over its space and
 * its reference, and what the command says of validation.
 */
#define _XOPEN_SOURCE 700 /* mkdtemp */
#define _DEFAULT_SOURCE
#include "tune_int.h"

/* ---- devices -------------------------------------------------------------------------------- */

/* Picks the device: --device, else the devices of the Language's backend (named like
 * Device.Name when given), the Device.Id-th of them (the first without one). */
/* Whether the device's backend builds variants in the problem's Language. */
static bool speaks(const kt_device *d, const char *language) {
    const char *l = kt_device_language(d);
    return l != NULL && strcmp(l, language) == 0;
}

/* The name of the backend that builds the problem's Language, for messages ("" when none has
 * a device). */
static const char *backend_for(kt_context *ctx, const char *language) {
    for (size_t i = 0; i < kt_context_device_count(ctx); i++)
        if (speaks(kt_context_device(ctx, i), language)) return kt_device_backend(kt_context_device(ctx, i));
    return "";
}

/* Registers the backend of a stand-in device (a replay, a fleet's coordinator) and gives it an
 * artifact directory of its own in dir (len bytes; made, *made set): its artifacts are worthless
 * and stay out of the cache's. Its device's index in *dev; NULL, or the error (allocated). */
char *stand_in(kt_context *ctx, const kt_backend *b, char *dir, size_t len, bool *made, long *dev) {
    kt_status st = kt_context_add_backend(ctx, b);
    if (st != KT_OK) return cli_format("%s: %s", kt_status_name(st), kt_last_error());
    const char *tmp = getenv("TMPDIR");
    if (tmp == NULL || tmp[0] == '\0') tmp = "/tmp";
    if ((size_t)snprintf(dir, len, "%s/kerntune-replay-XXXXXX", tmp) >= len) return cli_format("TMPDIR is too long (%s)", tmp);
    if (mkdtemp(dir) == NULL) return cli_format("cannot create a temporary directory: %s", strerror(errno));
    *made = true;
    if ((st = kt_context_set_artifact_dir(ctx, dir)) != KT_OK) return cli_format("%s: %s", kt_status_name(st), kt_last_error());
    for (size_t i = 0; i < kt_context_device_count(ctx); i++)
        if (strcmp(kt_device_backend(kt_context_device(ctx, i)), b->name) == 0) *dev = (long)i;
    return NULL;
}

long pick_device(kt_context *ctx, const t1 *p, const options *o, char **err) {
    size_t n = kt_context_device_count(ctx);
    const char *backend = backend_for(ctx, p->language);
    if (o->device >= 0) {
        if ((size_t)o->device >= n) {
            *err = cli_format("--device %ld: no such device (there are %zu; see 'kerntune devices')", o->device, n);
            return -1;
        }
        const kt_device *d = kt_context_device(ctx, (size_t)o->device);
        if (!speaks(d, p->language)) {
            *err = cli_format("--device %ld is a %s device, which does not build the problem's Language %s", o->device,
                              kt_device_backend(d), p->language);
            return -1;
        }
        return o->device;
    }
    long seen = 0, want = p->device_id < 0 ? 0 : p->device_id;
    for (size_t i = 0; i < n; i++) {
        const kt_device *d = kt_context_device(ctx, i);
        if (!speaks(d, p->language)) continue;
        if (p->device_name && strstr(kt_device_name(d), p->device_name) == NULL) continue;
        if (seen++ == want) return (long)i;
    }
    if (seen > 0 && p->device_id >= 0) {
        *err = cli_format("%s: KernelSpecification.Device.Id: %d, but there %s %ld %s device%s%s%s%s (see 'kerntune devices')", p->path,
                         p->device_id, seen == 1 ? "is" : "are", seen, backend, seen == 1 ? "" : "s", p->device_name ? " named like '" : "",
                         p->device_name ? p->device_name : "", p->device_name ? "'" : "");
        return -1;
    }
    if (p->device_name && backend[0]) {
        *err = cli_format("%s: KernelSpecification.Device.Name: no %s device is named like '%s' (see 'kerntune devices')", p->path,
                         backend, p->device_name);
        return -1;
    }
    char *msg = cli_format("no device builds the problem's Language %s", p->language);
    for (size_t i = 0; msg && i < kt_context_unavailable_count(ctx); i++) {
        char *more = cli_format("%s; %s", msg, kt_context_unavailable(ctx, i));
        free(msg);
        msg = more;
    }
    *err = msg;
    return -1;
}

/* ---- a problem made ready to measure: its data on the device, and the op over a space ------- */


void prepared_free(prepared *pr) {
    for (size_t i = 0; i < pr->nbuf; i++) {
        free(pr->host[i]);
        if (pr->dev_buf[i]) kt_device_free(pr->ctx, pr->dev, pr->dev_buf[i]);
    }
    for (size_t i = 0; i < pr->ref.n; i++) free(pr->ref.data[i]);
    kt_space_destroy(pr->ref_sp);
    memset(pr, 0, sizeof *pr);
}

/* Reads --answer FILE: the expected bytes of every output argument (a WriteOnly or ReadWrite
 * vector) as the tuning allocates it, one after another in the order of the problem's
 * Arguments, into pr->ref, which the reference function writes into the outputs as it writes
 * ReferenceArguments. NULL, or the error (allocated), naming the file and what it should hold. */
static char *read_answer(prepared *pr, const char *path) {
    const t1 *p = pr->p;
    reference *ref = &pr->ref;
    *ref = (reference){.ctx = pr->ctx, .device = pr->dev, .host = pr->host_dev};
    size_t want = 0, len = 1;
    for (size_t i = 0; i < p->nargs; i++)
        if (p->args[i].vector && p->args[i].access != KT_READ_ONLY) want += pr->args[i].bytes, len += strlen(p->args[i].name) + 64;
    if (want == 0) return cli_format("--answer %s: the problem has no output argument (a WriteOnly or ReadWrite vector) to compare", path);
    char *what = malloc(len); /* "c (256 float elements, 1024 bytes), ..." */
    if (what == NULL) return cli_format("out of memory");
    what[0] = '\0';
    for (size_t i = 0, n = 0; i < p->nargs; i++) {
        const t1_arg *a = &p->args[i];
        if (!a->vector || a->access == KT_READ_ONLY) continue;
        n += (size_t)snprintf(what + n, len - n, "%s%s (%zu %s elements, %zu bytes)", n ? ", " : "", a->name,
                              pr->args[i].bytes / kt_type_size(a->type), a->type_name, pr->args[i].bytes);
    }
    struct stat st;
    char *msg = NULL;
    if (stat(path, &st) != 0) msg = cli_format("--answer %s: cannot be read: %s", path, strerror(errno));
    else if (S_ISREG(st.st_mode) && (size_t)st.st_size != want)
        msg = cli_format("--answer %s: %lld bytes; expected %zu: the outputs %s, one after another in the order of the problem's Arguments",
                         path, (long long)st.st_size, want, what);
    free(what);
    if (msg) return msg;
    char *why = NULL, *bytes = t1_read_file(path, "the file", 0, want, NULL, &why);
    if (bytes == NULL) {
        msg = cli_format("--answer %s: %s", path, why ? why : "out of memory");
        free(why);
        return msg;
    }
    for (size_t i = 0, at = 0; i < p->nargs; i++) {
        if (!p->args[i].vector || p->args[i].access == KT_READ_ONLY) continue;
        size_t b = pr->args[i].bytes;
        ref->arg[ref->n] = i;
        ref->bytes[ref->n] = b;
        if ((ref->data[ref->n] = malloc(b)) == NULL) {
            free(bytes);
            return cli_format("out of memory");
        }
        memcpy(ref->data[ref->n++], bytes + at, b);
        at += b;
    }
    free(bytes);
    return NULL;
}

/* Makes the reference space (validating: when nothing stands in for the data) and every
 * argument's data, sized over sp and full_sp (and the reference); returns NULL, or the error
 * (allocated). pr's p, ctx, dev, host_dev, no_data and source are set by the caller. */
char *prepare(prepared *pr, const options *o, const int64_t *ps, size_t nps, kt_space *sp, kt_space *full_sp) {
    const t1 *p = pr->p;
    char *err = NULL;
    kt_status st;
#define PFAIL(...) return cli_format(__VA_ARGS__)
#define PKT(call)                                                              \
    do {                                                                       \
        if ((st = (call)) != KT_OK) PFAIL("%s: %s", kt_status_name(st), kt_last_error()); \
    } while (0)
    /* the reference: --answer, else ReferenceArguments, else the Default configuration when it
     * is a configuration of the space (every parameter's Default among its Values, meeting the
     * Conditions), else a consensus of the first configurations (declare) */
    if (!o->simulate && p->nrefs == 0 && !o->answer && !o->validate_off) {
        pr->ref_sp = make_space(p, NULL, 0, true, ps, nps, &err);
        size_t nref = 0;
        if (pr->ref_sp == NULL && err) return err;
        /* t1.c keeps a Default only when it is among its Values, and says why it did not */
        for (size_t i = 0; pr->ref_sp == NULL && pr->no_reference == NULL && i < p->nparams; i++)
            if (p->params[i].dflt == NULL && p->params[i].dflt_unused) {
                snprintf(pr->no_reference_buf, sizeof pr->no_reference_buf, "the Default of %s is not used: %s", p->params[i].name,
                         p->params[i].dflt_unused);
                pr->no_reference = pr->no_reference_buf;
            }
        if (pr->ref_sp == NULL && pr->no_reference == NULL) pr->no_reference = "a parameter has no Default";
        else if (pr->ref_sp && !enumerate(p, pr->ref_sp, NULL, 0, true, ps, nps, &nref, &err)) return err;
        else if (pr->ref_sp && nref == 0) {
            pr->no_reference = "the Default values break ConfigurationSpace.Conditions";
            kt_space_destroy(pr->ref_sp);
            pr->ref_sp = NULL;
        }
    }
    /* A buffer holds what every configuration that may run writes: its Size is evaluated over the
     * problem's whole space (as Kernel Tuner sizes it), over the space the --define values leave
     * (a value outside the problem's Values) and over the Default configuration (the reference,
     * which --define does not restrict), and the largest is taken. */
    kt_space *const sizing[3] = {sp, full_sp, pr->ref_sp};
    for (size_t i = 0; i < p->nargs; i++) {
        const t1_arg *a = &p->args[i];
        if (!a->vector) {
            pr->args[i] = (kt_arg){.type = a->type};
            if (a->type == KT_TYPE_F32) pr->args[i].f32 = (float)a->fill_value;
            else if (a->type == KT_TYPE_F64) pr->args[i].f64 = a->fill_value;
            else if (a->type >= KT_TYPE_U8 && a->type <= KT_TYPE_U64) pr->args[i].u = a->fill_bits;
            else pr->args[i].i = (int64_t)a->fill_bits; /* in range: checked when the problem was read */
            continue;
        }
        int64_t count = a->size;
        for (int k = 0; a->size_expr && k < 3; k++) {
            int64_t n;
            if (sizing[k] == NULL) continue;
            if (kt_space_eval_int(sizing[k], a->size_expr, &n) != KT_OK)
                PFAIL("%s: KernelSpecification.Arguments[%zu].Size: %s%s", o->problem, i, kt_last_error(),
                      k == 1 ? " (over the problem's whole space)" : k == 2 ? " (for the Default configuration)" : "");
            if (k == 0 || n > count) count = n;
        }
        if (count <= 0) PFAIL("%s: KernelSpecification.Arguments[%zu].Size: %lld elements; expected at least 1", o->problem, i, (long long)count);
        if ((uint64_t)count > SIZE_MAX / 16) PFAIL("%s: KernelSpecification.Arguments[%zu].Size: %lld elements is too many", o->problem, i, (long long)count);
        pr->elems[i] = count;
        if (o->simulate) count = 1; /* replay reads no data */
        size_t bytes = (size_t)count * kt_type_size(a->type);
        /* a fleet's coordinator never touches its buffers: calloc maps them without using memory */
        pr->host[i] = pr->no_data ? calloc(1, bytes) : malloc(bytes);
        if (pr->host[i] == NULL) PFAIL("argument '%s': cannot allocate %zu bytes", a->name, bytes);
        pr->nbuf = i + 1;
        if (!pr->no_data && !fill_data(p, a, i, pr->host[i], (size_t)count, o->seed, &err)) { /* only reading DataSource fails */
            char *msg = cli_format("%s: KernelSpecification.Arguments[%zu].DataSource: %s", o->problem, i, err ? err : "out of memory");
            free(err);
            return msg;
        }
        if (pr->host_dev || pr->build_only) {
            pr->args[i] = kt_arg_buf(pr->host[i], bytes);
        } else {
            PKT(kt_device_alloc(pr->ctx, pr->dev, bytes, &pr->dev_buf[i]));
            PKT(kt_device_write(pr->ctx, pr->dev, pr->dev_buf[i], pr->host[i], bytes));
            pr->args[i] = kt_arg_buf(pr->dev_buf[i], bytes);
        }
    }
    if (!pr->no_data && o->answer) return read_answer(pr, o->answer);
    if (!pr->no_data && p->nrefs > 0) { /* the expected contents from ReferenceArguments */
        reference *ref = &pr->ref;
        *ref = (reference){.ctx = pr->ctx, .device = pr->dev, .host = pr->host_dev};
        for (size_t r = 0; r < p->nrefs; r++) {
            size_t a = 0;
            while (strcmp(p->args[a].name, p->refs[r].target) != 0) a++;
            const t1_arg *ta = &p->args[a];
            t1_arg as_ref = *ta;
            as_ref.fill = p->refs[r].fill, as_ref.fill_value = p->refs[r].fill_value, as_ref.fill_bits = p->refs[r].fill_bits;
            as_ref.data_source = p->refs[r].data_source;
            as_ref.has_seed = p->refs[r].has_seed, as_ref.seed = p->refs[r].seed;
            ref->arg[ref->n] = a;
            ref->bytes[ref->n] = pr->args[a].bytes;
            ref->data[ref->n] = malloc(pr->args[a].bytes);
            if (ref->data[ref->n] == NULL) PFAIL("out of memory");
            ref->n++;
            if (!fill_data(p, &as_ref, a, ref->data[ref->n - 1], pr->args[a].bytes / kt_type_size(ta->type), o->seed, &err)) {
                char *msg = cli_format("%s: KernelSpecification.ReferenceArguments[%zu].DataSource: %s", o->problem, r, err ? err : "out of memory");
                free(err);
                return msg;
            }
        }
    }
    return NULL;
}

/* A work formula for a replay, whose buffers stand in with one element: each name of a vector
 * argument (that no parameter shadows) becomes its declared element count, so that the formula
 * gives what it gave on the recorded device. Names are the language's (a letter or '_', then
 * letters, digits, '_'); numbers and strings are copied as they are. NULL stays NULL. */
static char *work_declared(const prepared *pr, const char *formula) {
    if (formula == NULL) return NULL;
    const t1 *p = pr->p;
    size_t cap = strlen(formula) * 24 + 1, n = 0;
    char *out = malloc(cap);
    if (out == NULL) return NULL;
    for (const char *s = formula; *s;) {
        size_t len = 1;
        if (isdigit((unsigned char)*s) || (*s == '.' && isdigit((unsigned char)s[1]))) { /* 1e-3, 0x1f, 2.5 */
            while (isalnum((unsigned char)s[len]) || s[len] == '.' ||
                   ((s[len] == '+' || s[len] == '-') && (s[len - 1] == 'e' || s[len - 1] == 'E')))
                len++;
        } else if (*s == '\'' || *s == '"') {
            while (s[len] && s[len] != *s) len += (s[len] == '\\' && s[len + 1]) ? 2 : 1;
            if (s[len]) len++;
        } else if (isalpha((unsigned char)*s) || *s == '_') {
            while (isalnum((unsigned char)s[len]) || s[len] == '_') len++;
            bool param = false;
            for (size_t k = 0; k < p->nparams && !param; k++)
                param = strlen(p->params[k].name) == len && strncmp(p->params[k].name, s, len) == 0;
            for (size_t a = 0; a < p->nargs && !param; a++) {
                if (!p->args[a].vector || strlen(p->args[a].name) != len || strncmp(p->args[a].name, s, len) != 0) continue;
                n += (size_t)snprintf(out + n, cap - n, "(%lld)", (long long)pr->elems[a]);
                s += len;
                len = 0;
                break;
            }
            if (len == 0) continue;
        }
        memcpy(out + n, s, len);
        n += len, s += len;
    }
    out[n] = '\0';
    return out;
}

/* How many of the first configurations vote when a consensus chooses the reference. */

/* Declares op over configurations sp of the prepared problem: its arguments, the reference group
 * and the kernel's variants, and how they are validated; returns NULL, or the error (allocated).
 * validate: compare outputs against the reference here (off where no data is read). */
char *declare(prepared *pr, kt_space *const *sps, size_t nsp, bool validate, kt_op *op) {
    const t1 *p = pr->p;
    kt_status st;
    for (size_t i = 0; i < p->nargs; i++) {
        const t1_arg *a = &p->args[i];
        if (!a->vector) {
            PKT(kt_op_add_scalar(op, a->name, a->type));
            continue;
        }
        PKT(kt_op_add_buffer(op, a->name, a->type, a->access));
        if (a->constant) PKT(kt_op_set_constant(op, i));
        if (a->compare_sum) PKT(kt_op_set_compare(op, i, KT_COMPARE_SUM));
    }
    /* the reference group (the Default configuration) goes first: it is the budget's unit 0 */
    if (pr->ref_sp) {
        PKT(kt_op_add_variants(op, "reference", pr->ref_sp, pr->source, p->kernel_name, p->options, p->noptions));
        PKT(kt_op_set_kernel_tuner_contract(op, "reference", NULL)); /* T1 kernels are written for Kernel Tuner's defines */
        PKT(kt_op_set_default(op, "reference"));
    }
    /* one group "kernel" (a worker measuring several configurations at once: "kernel 0", ...) */
    for (size_t g = 0; g < nsp; g++) {
        char name[32] = "kernel";
        if (nsp > 1) snprintf(name, sizeof name, "kernel %zu", g);
        PKT(kt_op_add_variants(op, name, sps[g], pr->source, p->kernel_name, p->options, p->noptions));
        PKT(kt_op_set_kernel_tuner_contract(op, name, NULL));
    }
    if (p->atol >= 0) PKT(kt_op_set_tolerance(op, p->atol, p->rtol));
    /* the work of a call (x-kerntune); in a replay, whose buffers stand in with one element,
     * with the element counts the problem declares in place of the buffers' names */
    if ((p->work_flops || p->work_bytes) && !pr->replay) PKT(kt_op_set_work(op, p->work_flops, p->work_bytes));
    if ((p->work_flops || p->work_bytes) && pr->replay) {
        char *f = work_declared(pr, p->work_flops), *b = work_declared(pr, p->work_bytes);
        st = (f == NULL) != (p->work_flops == NULL) || (b == NULL) != (p->work_bytes == NULL) ? KT_ERR_NO_MEMORY : kt_op_set_work(op, f, b);
        free(f), free(b);
        if (st != KT_OK) PFAIL("%s: %s", kt_status_name(st), st == KT_ERR_NO_MEMORY ? "out of memory" : kt_last_error());
    }
    if (!validate) { /* no outputs to compare: what stands in for the device validated (a recording, a worker) */
        if (pr->ref_sp) PKT(kt_op_set_reference_only(op, 1)); /* still never the winner */
        PKT(kt_op_set_validation(op, 0));
    } else if (pr->ref.n > 0) { /* --answer, or ReferenceArguments */
        PKT(kt_op_set_reference_fn(op, write_reference, &pr->ref));
    } else if (pr->ref_sp != NULL) {
        /* the configuration of the parameters' Default values is the reference (added above): it
         * validates, but the winner comes from the space the user asked for (--define included) */
        PKT(kt_op_set_reference_only(op, 1));
    } else {
        /* no usable Default: of the first configurations, the one whose outputs agree with the
         * most of them (never blindly the first: it may be the one that is wrong) */
        PKT(kt_op_set_reference(op, nsp > 1 ? "kernel 0" : "kernel"));
        PKT(kt_op_set_reference_consensus(op, CONSENSUS_VOTERS));
    }
    return NULL;
#undef PFAIL
#undef PKT
}

/* ---- which reference validated, and why ----------------------------------------------------- */

/* What `kerntune tune` says of validation, in --json and the T4's "x-kerntune": {"validation":
 * "reference" or "off", "reference": {"source", "why", and as they apply "configuration",
 * "agreeing", "among", "file"}}; the text line into line (empty when there is none to print).
 * ref_config: the reference's configuration, when a configuration was the reference;
 * agree/among: a consensus's votes; active: the reference was used. */
json_t *validation_info(const prepared *pr, const options *o, const char *const *names, const char *ref_config, size_t agree,
                               size_t among, bool active, char *line, size_t len) {
    const t1 *p = pr->p;
    json_t *v = json_object(), *r = json_object();
    const char *source = "none", *why = NULL;
    char label[64] = "";
    line[0] = '\0';
    if (o->validate_off) {
        why = "--validate off";
        snprintf(line, len, "validation: off (--validate off): no configuration's output was checked");
    } else if (o->simulate) {
        why = "a replay: the recording says which configurations were correct";
    } else if (o->workers) {
        source = "each worker's", why = "each worker validates what it measures against the reference it chose itself";
    } else if (!active) {
        why = "the reference could not be used";
    } else if (o->answer) {
        source = "answer file", why = "--answer";
        json_object_set_new(r, "file", json_string(o->answer));
        snprintf(line, len, "validation: against the answer file %s", o->answer);
    } else if (p->nrefs > 0) {
        source = "ReferenceArguments", why = "the problem gives ReferenceArguments";
        snprintf(line, len, "validation: against the problem's ReferenceArguments");
    } else if (pr->ref_sp) {
        source = "Default", why = "every parameter's Default is among its Values and meets the Conditions";
        snprintf(line, len, "validation: against the Default configuration %s", ref_config ? ref_config : "");
    } else {
        if (among == 0) agree = among = 1; /* one configuration voted: it is the reference */
        snprintf(label, sizeof label, "consensus of %zu of %zu", agree, among);
        source = label, why = pr->no_reference;
        json_object_set_new(r, "agreeing", json_integer((json_int_t)agree));
        json_object_set_new(r, "among", json_integer((json_int_t)among));
        snprintf(line, len, "validation: against the consensus of %zu of %zu configurations (%s): the reference is %s", agree, among,
                 pr->no_reference ? pr->no_reference : "", ref_config ? ref_config : "");
    }
    json_object_set_new(r, "source", json_string(source));
    json_object_set_new(r, "why", why ? json_string(why) : json_null());
    if (ref_config && active && !o->answer && p->nrefs == 0)
        json_object_set_new(r, "configuration", t4_configuration(ref_config, names, p->nparams));
    json_object_set_new(v, "validation", json_string(o->validate_off ? "off" : "reference"));
    json_object_set_new(v, "reference", r);
    return v;
}


"""The sandbox image's sources: its Dockerfile, the supervisor package, the language registry
(``toolchains``) and the supervisor's entry point (``run_supervisor.py``).

Standard library only: the whole folder is the image's build context and is copied into it
(``gym_sysmath.sandbox.daemon`` hashes and builds it), and the host imports the very same files
(``toolchains``, and the codecs ``supervisor.protocol``, ``supervisor.values`` and
``supervisor.limits``), so host and sandbox never hold two copies of one table or codec.
"""
